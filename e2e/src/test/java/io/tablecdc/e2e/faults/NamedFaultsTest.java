package io.tablecdc.e2e.faults;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.lang.classfile.ClassFile;
import java.lang.classfile.ClassModel;
import java.lang.classfile.CodeModel;
import java.lang.classfile.MethodModel;
import java.lang.classfile.instruction.InvokeInstruction;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import io.tablecdc.e2e.stack.PluginArchives;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * Every named step, and every place its failed or hung call is put, names a method that exists in the plugins' archives
 * (or in Kafka Connect), and a step placed at a call ({@code AT INVOKE x}, {@code AFTER INVOKE x}) sits in a method
 * that makes that call. A Byteman rule whose method is gone is not an error: it never fires, and a test waiting for it
 * would only time out, or a randomized run report the step as not reached. This catches a method renamed or moved.
 */
class NamedFaultsTest {
    private static URLClassLoader plugins;

    @BeforeAll
    static void unzipPlugins() throws IOException {
        Path dir = PluginArchives.unzipInto(StackPaths.workDir("named-faults-plugins"));
        List<URL> jars = new ArrayList<>();
        try (Stream<Path> files = Files.walk(dir)) {
            for (Path jar : files.filter(f -> f.toString().endsWith(".jar")).toList()) {
                jars.add(jar.toUri().toURL());
            }
        }
        plugins = new URLClassLoader(jars.toArray(URL[]::new), NamedFaultsTest.class.getClassLoader());
    }

    @Test
    void everyStepAndEveryPlacementOfItsCallNamesAMethodThatExists() throws Exception {
        List<Fault> faults = new ArrayList<>();
        for (Method method : NamedFaults.class.getDeclaredMethods()) {
            if (Modifier.isPublic(method.getModifiers()) && method.getReturnType() == Fault.Step.class
                    && method.getParameterCount() == 0) {
                Fault.Step step = (Fault.Step) method.invoke(null);
                faults.add(step.kill());
                try {
                    faults.add(NamedFaults.failedCall(step));
                } catch (IllegalArgumentException noCall) {
                    // a step with nothing to fail (a rebalance step, Kafka's acknowledgement)
                }
                try {
                    faults.add(NamedFaults.hungCall(step, 1_000));
                } catch (IllegalArgumentException noCall) {
                    // likewise
                }
            }
        }
        assertTrue(faults.size() >= 20, "the named steps are found: " + faults.size());
        List<String> wrong = new ArrayList<>();
        for (Fault fault : faults) {
            String problem = problem(fault);
            if (problem != null) {
                wrong.add(fault.name() + " (" + fault.className() + "." + fault.method() + " " + fault.location() + "): " + problem);
            }
        }
        assertTrue(wrong.isEmpty(), "faults placed where no such method or call is: " + wrong);
    }

    @Test
    void aMovedMethodIsFound() throws Exception {
        Fault moved = Fault.at("moved", "io.tablecdc.pg.ApplyTask", "noSuchMethod", "AT ENTRY").kill();
        Fault notCalled = Fault.at("not-called", "io.tablecdc.pg.ApplyTask", "commit", "AT INVOKE noSuchCall").kill();
        assertTrue(problem(moved) != null && problem(notCalled) != null, "a missing method and a missing call are reported");
    }

    private static String problem(Fault fault) throws IOException {
        String resource = fault.className().replace('.', '/') + ".class";
        ClassModel model;
        try (InputStream in = plugins.getResourceAsStream(resource)) {
            if (in == null) {
                return "no such class in the plugins or Kafka Connect";
            }
            model = ClassFile.of().parse(in.readAllBytes());
        }
        List<MethodModel> methods = model.methods().stream()
                .filter(m -> m.methodName().equalsString(fault.method())).toList();
        if (methods.isEmpty()) {
            return "no such method";
        }
        String location = fault.location().trim();
        if (!location.contains("INVOKE ")) {
            return null;
        }
        String call = location.substring(location.indexOf("INVOKE ") + "INVOKE ".length()).trim();
        for (MethodModel method : methods) {
            CodeModel code = method.code().orElse(null);
            if (code != null && code.elementStream().anyMatch(e -> e instanceof InvokeInstruction invoke
                    && invoke.name().equalsString(call))) {
                return null;
            }
        }
        return "the method makes no call to " + call;
    }
}
