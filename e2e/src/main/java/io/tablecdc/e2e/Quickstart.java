package io.tablecdc.e2e;

import java.io.PrintStream;
import java.util.List;

import io.tablecdc.e2e.stack.LocalStack;

/**
 * The quickstart: starts the local stack, prints its endpoints, shows the tablecdc plugins the Connect
 * worker loaded from the Hub archives, and keeps the stack up until Ctrl-C when run from a terminal.
 */
public final class Quickstart {
    private Quickstart() {
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = System.out;
        long started = System.nanoTime();
        LocalStack stack = LocalStack.get();
        out.println();
        out.println("tablecdc local stack");
        out.println("  Kafka bootstrap      " + stack.kafka().bootstrapServers());
        out.println("  Postgres (source and catalog)  " + stack.postgres().adminUrl() + "  user " + stack.postgres().user());
        out.println("  Connect REST         " + stack.connect().restUrl());
        List<String> plugins = stack.connect().rest().connectorPlugins().stream()
                .filter(p -> p.startsWith("io.tablecdc.")).toList();
        out.println("  tablecdc plugins     " + String.join(", ", plugins));
        out.printf("  started in %.1f s%n", (System.nanoTime() - started) / 1e9);
        out.println();
        boolean interactive = System.console() != null && !List.of(args).contains("--exit");
        if (interactive) {
            out.println("The stack stays up until Ctrl-C.");
            Thread.currentThread().join();
        }
        System.exit(0);
    }
}
