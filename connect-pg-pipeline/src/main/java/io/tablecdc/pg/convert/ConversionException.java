package io.tablecdc.pg.convert;

import org.apache.kafka.connect.errors.DataException;

/** A text value from pgoutput cannot become a Connect value; the message names the table, column and value. */
public class ConversionException extends DataException {
    private static final long serialVersionUID = 1L;

    public ConversionException(String message) {
        super(message);
    }

    public ConversionException(String message, Throwable cause) {
        super(message, cause);
    }
}
