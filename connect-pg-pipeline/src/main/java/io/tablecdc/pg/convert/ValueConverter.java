package io.tablecdc.pg.convert;

import java.math.BigDecimal;
import java.math.RoundingMode;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

import org.apache.kafka.connect.data.Date;
import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;

import io.tablecdc.common.TablecdcTypes;

/**
 * The Connect schema and value of a PostgreSQL column from its type oid, type modifier and text value (what
 * pgoutput protocol version 1 sends). The mapping, with the reasons for each choice, is the table in
 * {@code docs/pg-pipeline-wire.md}; in short:
 * <ul>
 *   <li>{@code numeric(p,s)} becomes a Connect {@code Decimal} with scale {@code s} and the
 *       {@code connect.decimal.precision} parameter the sink reads; {@code NaN} and {@code ±Infinity}, which a
 *       decimal cannot hold, become null. {@code numeric} without a modifier (or wider than 76 digits) stays
 *       exact text.</li>
 *   <li>{@code date}, {@code timestamp} and {@code timestamptz} {@code ±infinity} become the largest and smallest
 *       value of their Connect type ({@code Integer.MAX_VALUE}/{@code MIN_VALUE} days, {@code Long.MAX_VALUE}/
 *       {@code MIN_VALUE} microseconds), as PostgreSQL stores them; the sink stores them at the edge of ClickHouse's
 *       range and counts them, or keeps them exactly as integers.</li>
 *   <li>{@code interval} is ISO 8601 text as PostgreSQL's {@code iso_8601} style writes it.</li>
 *   <li>Types it does not know (enums, domains, extension types, geometric types) are text.</li>
 * </ul>
 */
public final class ValueConverter {
    /** The Connect decimal parameter the ClickHouse sink reads the precision from. */
    public static final String DECIMAL_PRECISION_PARAMETER = "connect.decimal.precision";
    /** The widest decimal ClickHouse holds ({@code Decimal256}); wider numerics stay text. */
    public static final int MAX_DECIMAL_PRECISION = 76;

    private ValueConverter() {
    }

    /**
     * The converter of a column of type {@code typeOid} with modifier {@code typeModifier} ({@code -1} when
     * none); {@code optional} says whether its Connect schema is optional.
     */
    public static ColumnConverter forType(long typeOid, int typeModifier, boolean optional) {
        long element = PgTypes.arrayElement(typeOid);
        if (element >= 0) {
            ColumnConverter elements = forType(element, typeModifier, true);
            SchemaBuilder schema = SchemaBuilder.array(elements.schema());
            return new ColumnConverter(finish(schema, optional), text -> {
                List<String> texts = PgText.arrayElements(text);
                List<Object> values = new ArrayList<>(texts.size());
                for (String item : texts) {
                    values.add(item == null ? null : elements.convert(item));
                }
                return values;
            });
        }
        if (typeOid == PgTypes.INT2) {
            return of(SchemaBuilder.int16(), optional, Short::parseShort);
        }
        if (typeOid == PgTypes.INT4) {
            return of(SchemaBuilder.int32(), optional, Integer::parseInt);
        }
        if (typeOid == PgTypes.INT8 || typeOid == PgTypes.OID) {
            return of(SchemaBuilder.int64(), optional, Long::parseLong);
        }
        if (typeOid == PgTypes.FLOAT4) {
            // Java reads PostgreSQL's NaN, Infinity and -Infinity spellings as they are
            return of(SchemaBuilder.float32(), optional, Float::parseFloat);
        }
        if (typeOid == PgTypes.FLOAT8) {
            return of(SchemaBuilder.float64(), optional, Double::parseDouble);
        }
        if (typeOid == PgTypes.NUMERIC) {
            return numeric(typeModifier, optional);
        }
        if (typeOid == PgTypes.BOOL) {
            return of(SchemaBuilder.bool(), optional, PgText::bool);
        }
        if (typeOid == PgTypes.BYTEA) {
            return of(SchemaBuilder.bytes(), optional, PgText::bytea);
        }
        if (typeOid == PgTypes.UUID) {
            return of(TablecdcTypes.uuid(), optional, text -> java.util.UUID.fromString(text).toString());
        }
        if (typeOid == PgTypes.JSON || typeOid == PgTypes.JSONB) {
            return of(TablecdcTypes.json(), optional, text -> text);
        }
        if (typeOid == PgTypes.DATE) {
            return of(Date.builder(), optional, text -> new java.util.Date(Math.multiplyExact(PgText.epochDay(text), 86_400_000L)));
        }
        if (typeOid == PgTypes.TIME) {
            return of(TablecdcTypes.microTime(), optional, PgText::microsOfDay);
        }
        if (typeOid == PgTypes.TIMESTAMP || typeOid == PgTypes.TIMESTAMPTZ) {
            return of(TablecdcTypes.microTimestamp(), optional, PgText::epochMicros);
        }
        if (typeOid == PgTypes.INTERVAL) {
            return of(SchemaBuilder.string(), optional, PgText::isoInterval);
        }
        // text, varchar, bpchar, name, "char", timetz, xml, money, enums, domains, extension types: the
        // server's own text
        return of(SchemaBuilder.string(), optional, text -> text);
    }

    /**
     * {@code (precision, scale)} of a {@code numeric} type modifier, or null when there is none. PostgreSQL 15+
     * allows a negative scale and a scale above the precision; the scale is an 11-bit signed field.
     */
    static int[] numericPrecisionScale(int typeModifier) {
        if (typeModifier < 4) {
            return null;
        }
        int packed = typeModifier - 4;
        int precision = (packed >> 16) & 0xFFFF;
        int scale = ((packed & 0x7FF) ^ 1024) - 1024;
        return new int[] {precision, scale};
    }

    private static ColumnConverter numeric(int typeModifier, boolean optional) {
        int[] ps = numericPrecisionScale(typeModifier);
        if (ps == null) {
            return of(SchemaBuilder.string(), optional, text -> text);
        }
        // numeric(2,-3) holds 99000: 5 integer digits; numeric(3,5) holds 0.00999: 5 fractional digits
        int scale = Math.max(ps[1], 0);
        int precision = Math.max(ps[0], ps[1]) - Math.min(ps[1], 0);
        if (precision > MAX_DECIMAL_PRECISION) {
            return of(SchemaBuilder.string(), optional, text -> text);
        }
        SchemaBuilder schema = Decimal.builder(scale).parameter(DECIMAL_PRECISION_PARAMETER, Integer.toString(precision));
        return of(schema, optional, text -> switch (text) {
            case "NaN", "Infinity", "-Infinity" -> null;
            default -> new BigDecimal(text).setScale(scale, RoundingMode.UNNECESSARY);
        });
    }

    /** A column carried as the server's text, whatever its type. */
    public static ColumnConverter text(boolean optional) {
        return of(SchemaBuilder.string(), optional, text -> text);
    }

    private static ColumnConverter of(SchemaBuilder schema, boolean optional, Function<String, Object> parse) {
        return new ColumnConverter(finish(schema, optional), parse);
    }

    private static Schema finish(SchemaBuilder schema, boolean optional) {
        return optional ? schema.optional().build() : schema.build();
    }
}
