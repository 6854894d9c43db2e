package io.tablecdc.e2e.stack;

import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.connect.cli.ConnectDistributed;
import org.apache.kafka.connect.runtime.Connect;

/** Entry point of a worker run as its own JVM: {@code ConnectWorkerMain <worker.properties> <url file>}. */
public final class ConnectWorkerMain {
    private ConnectWorkerMain() {
    }

    public static void main(String[] args) throws Exception {
        Properties properties = new Properties();
        try (InputStream in = Files.newInputStream(Path.of(args[0]))) {
            properties.load(in);
        }
        Map<String, String> props = new HashMap<>();
        properties.stringPropertyNames().forEach(name -> props.put(name, properties.getProperty(name)));
        Connect<?> connect = new ConnectDistributed().startConnect(props);
        Runtime.getRuntime().addShutdownHook(new Thread(connect::stop, "connect-shutdown"));
        Path urlFile = Path.of(args[1]);
        Path tmp = urlFile.resolveSibling(urlFile.getFileName() + ".tmp");
        Files.writeString(tmp, connect.rest().serverUrl().toString());
        Files.move(tmp, urlFile, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
        connect.awaitStop();
    }
}
