package io.tablecdc.e2e.faults;

/** A child JVM for {@link FaultInjectorTest}: runs {@link #step} five times and prints what each did. */
public final class FaultTarget {
    private FaultTarget() {
    }

    public static void main(String[] args) {
        for (int i = 1; i <= 5; i++) {
            try {
                long start = System.nanoTime();
                int result = step(i);
                long millis = (System.nanoTime() - start) / 1_000_000;
                System.out.println("step " + i + " returned " + result + (millis >= 1_000 ? " after " + millis / 1_000 + " s" : ""));
            } catch (RuntimeException e) {
                System.out.println("step " + i + " threw " + e.getMessage());
            }
            System.out.flush();
        }
        System.out.println("done");
    }

    static int step(int i) {
        return i * 10;
    }
}
