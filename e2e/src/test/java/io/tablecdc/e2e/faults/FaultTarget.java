package io.tablecdc.e2e.faults;

/** A child JVM for {@link FaultInjectorTest}: runs {@link #step} five times and prints what each did. */
public final class FaultTarget {
    private FaultTarget() {
    }

    public static void main(String[] args) {
        for (int i = 1; i <= 5; i++) {
            try {
                System.out.println("step " + i + " returned " + step(i));
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
