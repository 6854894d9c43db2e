package io.tablecdc.catalog;

import java.io.PrintStream;
import java.util.Map;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * {@code tablecdc-catalog-migrate}: applies the catalog migrations from the command line, for
 * deployments that run connectors with {@code catalog.migrate=false}.
 *
 * <p>{@code --url} (or {@code TABLECDC_CATALOG_JDBC_URL}), {@code --user} (or
 * {@code TABLECDC_CATALOG_USER}); the password only from {@code TABLECDC_CATALOG_PASSWORD}. With
 * {@code --check} it only verifies the schema. Safe to run again: a second run applies nothing.
 */
public final class MigrateCommand {

    private static final String USAGE = "usage: tablecdc-catalog-migrate [--url JDBC_URL] [--user USER] [--check]\n"
            + "  the password comes from TABLECDC_CATALOG_PASSWORD; the URL and user may come from\n"
            + "  TABLECDC_CATALOG_JDBC_URL and TABLECDC_CATALOG_USER";

    private MigrateCommand() {
    }

    public static void main(String[] args) {
        System.exit(run(args, System.getenv(), System.out, System.err));
    }

    static int run(String[] args, Map<String, String> env, PrintStream out, PrintStream err) {
        String url = env.get("TABLECDC_CATALOG_JDBC_URL");
        String user = env.get("TABLECDC_CATALOG_USER");
        boolean check = false;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--url" -> url = i + 1 < args.length ? args[++i] : null;
                case "--user" -> user = i + 1 < args.length ? args[++i] : null;
                case "--check" -> check = true;
                case "-h", "--help" -> {
                    out.println(USAGE);
                    return 0;
                }
                default -> {
                    err.println("tablecdc-catalog-migrate: unknown argument " + args[i] + "\n" + USAGE);
                    return 2;
                }
            }
        }
        if (url == null || !url.startsWith("jdbc:postgresql:")) {
            err.println("tablecdc-catalog-migrate: a catalog JDBC URL starting with jdbc:postgresql: is needed\n"
                    + USAGE);
            return 2;
        }
        PGSimpleDataSource dataSource = new PGSimpleDataSource();
        try {
            dataSource.setUrl(url);
        } catch (IllegalArgumentException e) {
            err.println("tablecdc-catalog-migrate: the catalog JDBC URL is not valid");
            return 2;
        }
        if (user != null && !user.isEmpty()) {
            dataSource.setUser(user);
        }
        String password = env.get("TABLECDC_CATALOG_PASSWORD");
        if (password != null) {
            dataSource.setPassword(password);
        }
        dataSource.setApplicationName("tablecdc-catalog-migrate");
        try {
            if (check) {
                out.println("catalog schema is at version " + CatalogMigrations.verify(dataSource)
                        + ", the one this release needs");
            } else {
                CatalogMigrations.Outcome outcome = CatalogMigrations.migrate(dataSource);
                out.println("catalog schema version " + outcome.versionBefore() + " -> " + outcome.versionAfter()
                        + " (" + outcome.migrationsApplied() + " migrations applied)");
            }
            return 0;
        } catch (CatalogSchemaException e) {
            err.println("tablecdc-catalog-migrate: " + e.getMessage()
                    .replaceAll("(?i)(password|passwd|pwd)=[^&;\\s]*", "$1=****"));
            return 1;
        }
    }
}
