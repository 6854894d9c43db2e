package io.tablecdc.common;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Properties;

/** The tablecdc release every connector reports as its {@code version()}. */
public final class Version {
    private static final String VERSION = load();

    private Version() {
    }

    public static String get() {
        return VERSION;
    }

    private static String load() {
        Properties props = new Properties();
        try (InputStream in = Version.class.getResourceAsStream("version.properties")) {
            if (in == null) {
                return "unknown";
            }
            props.load(in);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read tablecdc's version.properties", e);
        }
        return props.getProperty("version", "unknown");
    }
}
