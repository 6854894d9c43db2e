package io.tablecdc.e2e.clickhouse;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_DOUBLE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The ClickHouse engine of chDB ({@code libchdb.so}) called in-process through the foreign function API.
 *
 * <p><b>Test fixture.</b> This exists so tests and the quickstart get a real ClickHouse engine without a
 * server or Docker; production always talks to a ClickHouse server.
 *
 * <p>The engine keeps one storage path per process, so at most one instance is open at a time in a JVM;
 * {@link #close()} shuts the engine down and a later {@link #open} boots it again. A connection runs one
 * statement at a time and keeps session state (current database, SET), so every statement is serialized on
 * one lock; that is plenty for tests.
 *
 * <p>The npm package ships no header: the signatures follow chDB's published {@code chdb.h}, checked
 * against the symbols {@code nm -D} lists for 26.5.3. {@code chdb_connect} returns a
 * {@code chdb_connection*}; the query functions take the {@code chdb_connection} it points to.
 */
public final class Chdb implements AutoCloseable {

    private static final Linker LINKER = Linker.nativeLinker();
    private static final Pattern CODE = Pattern.compile("Code: (\\d+)\\.");
    private static final ReentrantLock OPEN = new ReentrantLock();
    private static Chdb current;

    private final Arena arena = Arena.ofShared();
    private final ReentrantLock lock = new ReentrantLock();
    private final Path dataDir;
    private final MethodHandle queryN;
    private final MethodHandle queryWithParamsN;
    private final MethodHandle closeConn;
    private final MethodHandle resultBuffer;
    private final MethodHandle resultLength;
    private final MethodHandle resultError;
    private final MethodHandle resultRowsRead;
    private final MethodHandle resultStorageRowsRead;
    private final MethodHandle resultStorageBytesRead;
    private final MethodHandle resultRowsWritten;
    private final MethodHandle resultBytesWritten;
    private final MethodHandle resultElapsed;
    private final MethodHandle destroyResult;
    private MemorySegment connPtr; // chdb_connection*, kept for chdb_close_conn
    private MemorySegment conn;    // chdb_connection

    /**
     * What one statement returned: the output in the requested format, plus the engine's counters
     * ({@code resultRows}: rows in the output; {@code rowsRead/bytesRead}: read from storage).
     */
    public record Result(byte[] data, long resultRows, long rowsRead, long bytesRead, long rowsWritten,
                         long bytesWritten, double elapsedSeconds) {}

    /** An error the engine reported; {@link #code()} is ClickHouse's error code, or 0 when none was given. */
    public static final class ChdbException extends RuntimeException {
        private final int code;

        ChdbException(String message) {
            super(message);
            Matcher m = CODE.matcher(message);
            this.code = m.find() ? Integer.parseInt(m.group(1)) : 0;
        }

        public int code() {
            return code;
        }
    }

    /**
     * Loads {@code library} and boots the engine with its data under {@code dataDir}.
     *
     * @throws IllegalStateException when another instance is open in this JVM
     */
    public static Chdb open(Path library, Path dataDir) {
        OPEN.lock();
        try {
            if (current != null) {
                throw new IllegalStateException("chDB is already open on " + current.dataDir
                        + "; the engine supports one storage path per process, close it first");
            }
            current = new Chdb(library, dataDir);
            return current;
        } finally {
            OPEN.unlock();
        }
    }

    private Chdb(Path library, Path dataDir) {
        if (!Files.isRegularFile(library)) {
            throw new IllegalArgumentException("chDB library not found: " + library);
        }
        this.dataDir = dataDir;
        // Loaded into the global arena: dlclose of a running ClickHouse engine is not something to try.
        SymbolLookup lib = SymbolLookup.libraryLookup(library, Arena.global());
        MethodHandle connect = fn(lib, "chdb_connect", FunctionDescriptor.of(ADDRESS, JAVA_INT, ADDRESS));
        queryN = fn(lib, "chdb_query_n",
                FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS, JAVA_LONG, ADDRESS, JAVA_LONG));
        queryWithParamsN = fn(lib, "chdb_query_with_params_n", FunctionDescriptor.of(ADDRESS,
                ADDRESS, ADDRESS, JAVA_LONG, ADDRESS, JAVA_LONG, ADDRESS, ADDRESS, ADDRESS, ADDRESS, JAVA_LONG));
        closeConn = fn(lib, "chdb_close_conn", FunctionDescriptor.ofVoid(ADDRESS));
        resultBuffer = fn(lib, "chdb_result_buffer", FunctionDescriptor.of(ADDRESS, ADDRESS));
        resultLength = fn(lib, "chdb_result_length", FunctionDescriptor.of(JAVA_LONG, ADDRESS));
        resultError = fn(lib, "chdb_result_error", FunctionDescriptor.of(ADDRESS, ADDRESS));
        resultRowsRead = fn(lib, "chdb_result_rows_read", FunctionDescriptor.of(JAVA_LONG, ADDRESS));
        resultStorageRowsRead = fn(lib, "chdb_result_storage_rows_read", FunctionDescriptor.of(JAVA_LONG, ADDRESS));
        resultStorageBytesRead = fn(lib, "chdb_result_storage_bytes_read",
                FunctionDescriptor.of(JAVA_LONG, ADDRESS));
        resultRowsWritten = fn(lib, "chdb_result_rows_written", FunctionDescriptor.of(JAVA_LONG, ADDRESS));
        resultBytesWritten = fn(lib, "chdb_result_bytes_written", FunctionDescriptor.of(JAVA_LONG, ADDRESS));
        resultElapsed = fn(lib, "chdb_result_elapsed", FunctionDescriptor.of(JAVA_DOUBLE, ADDRESS));
        destroyResult = fn(lib, "chdb_destroy_query_result", FunctionDescriptor.ofVoid(ADDRESS));

        List<String> args = List.of("clickhouse", "--path=" + dataDir.toAbsolutePath());
        MemorySegment argv = arena.allocate(ADDRESS, args.size());
        for (int i = 0; i < args.size(); i++) {
            argv.setAtIndex(ADDRESS, i, arena.allocateFrom(args.get(i)));
        }
        // The JVM turns SIGSEGV/SIGBUS/SIGFPE/SIGILL into NullPointerExceptions, safepoints and the like, so
        // the engine must not own those signals. chdb_set_signal_handlers_enabled(0) keeps chDB from
        // installing its handlers, but in 26.5 the call itself also resets those four to SIG_DFL (it takes
        // them for its own), and the next implicit null check kills the process. So the JVM's handlers are
        // saved first and put back once the engine has booted.
        SignalHandlers jvmHandlers = SignalHandlers.save();
        try {
            lib.find("chdb_set_signal_handlers_enabled").ifPresent(f ->
                    invoke(LINKER.downcallHandle(f, FunctionDescriptor.ofVoid(JAVA_INT)), 0));
            connPtr = (MemorySegment) invoke(connect, args.size(), argv);
        } finally {
            jvmHandlers.restore();
        }
        if (connPtr.equals(MemorySegment.NULL)) {
            arena.close();
            throw new ChdbException("chdb_connect failed for data path " + dataDir);
        }
        conn = connPtr.reinterpret(ADDRESS.byteSize()).get(ADDRESS, 0);
    }

    /** Runs one statement and returns its output in {@code format} (any ClickHouse output format). */
    public Result query(String sql, String format) {
        return query(sql.getBytes(StandardCharsets.UTF_8), format, Map.of());
    }

    /**
     * Runs one statement given as raw bytes, so an {@code INSERT … FORMAT X} may carry binary data after
     * the SQL exactly as the HTTP interface's body does. {@code params} bind {@code {name:Type}}
     * placeholders on the engine side; values are never spliced into the SQL.
     *
     * @throws ChdbException with the engine's message and code when the statement fails
     */
    public Result query(byte[] sql, String format, Map<String, String> params) {
        lock.lock();
        try (Arena call = Arena.ofConfined()) {
            if (conn == null) {
                throw new IllegalStateException("chDB is closed");
            }
            MemorySegment q = call.allocate(Math.max(1, sql.length));
            MemorySegment.copy(sql, 0, q, ValueLayout.JAVA_BYTE, 0, sql.length);
            byte[] fmt = format.getBytes(StandardCharsets.UTF_8);
            MemorySegment f = call.allocateFrom(ValueLayout.JAVA_BYTE, fmt);
            MemorySegment result;
            if (params.isEmpty()) {
                result = (MemorySegment) invoke(queryN, conn, q, (long) sql.length, f, (long) fmt.length);
            } else {
                int n = params.size();
                MemorySegment names = call.allocate(ADDRESS, n);
                MemorySegment nameLens = call.allocate(JAVA_LONG, n);
                MemorySegment values = call.allocate(ADDRESS, n);
                MemorySegment valueLens = call.allocate(JAVA_LONG, n);
                int i = 0;
                for (Map.Entry<String, String> p : params.entrySet()) {
                    byte[] name = p.getKey().getBytes(StandardCharsets.UTF_8);
                    byte[] value = p.getValue().getBytes(StandardCharsets.UTF_8);
                    names.setAtIndex(ADDRESS, i, call.allocateFrom(ValueLayout.JAVA_BYTE, name));
                    nameLens.setAtIndex(JAVA_LONG, i, name.length);
                    // never a zero-length allocation: an empty string parameter is legal
                    MemorySegment v = call.allocate(Math.max(1, value.length));
                    MemorySegment.copy(value, 0, v, ValueLayout.JAVA_BYTE, 0, value.length);
                    values.setAtIndex(ADDRESS, i, v);
                    valueLens.setAtIndex(JAVA_LONG, i, value.length);
                    i++;
                }
                result = (MemorySegment) invoke(queryWithParamsN, conn, q, (long) sql.length, f, (long) fmt.length,
                        names, nameLens, values, valueLens, (long) n);
            }
            if (result.equals(MemorySegment.NULL)) {
                throw new ChdbException("chDB returned no result");
            }
            try {
                MemorySegment error = (MemorySegment) invoke(resultError, result);
                if (!error.equals(MemorySegment.NULL)) {
                    throw new ChdbException(error.reinterpret(Long.MAX_VALUE).getString(0).strip());
                }
                long len = (long) invoke(resultLength, result);
                MemorySegment buf = (MemorySegment) invoke(resultBuffer, result);
                byte[] data = len == 0 || buf.equals(MemorySegment.NULL)
                        ? new byte[0] : buf.reinterpret(len).toArray(ValueLayout.JAVA_BYTE);
                return new Result(data, (long) invoke(resultRowsRead, result),
                        (long) invoke(resultStorageRowsRead, result), (long) invoke(resultStorageBytesRead, result),
                        (long) invoke(resultRowsWritten, result), (long) invoke(resultBytesWritten, result),
                        (double) invoke(resultElapsed, result));
            } finally {
                invoke(destroyResult, result);
            }
        } finally {
            lock.unlock();
        }
    }

    /**
     * Runs {@code work} while no other thread can use the connection, so a sequence of statements (switch
     * database, SET, query, reset) sees and leaves the session as it expects.
     */
    public <T> T exclusive(Supplier<T> work) {
        lock.lock();
        try {
            return work.get();
        } finally {
            lock.unlock();
        }
    }

    /** Closes the connection, which shuts the engine down; the library stays mapped until the JVM exits. */
    @Override
    public void close() {
        lock.lock();
        try {
            if (conn == null) {
                return;
            }
            invoke(closeConn, connPtr);
            conn = null;
            arena.close();
        } finally {
            lock.unlock();
        }
        OPEN.lock();
        try {
            if (current == this) {
                current = null;
            }
        } finally {
            OPEN.unlock();
        }
    }

    /** The process's signal dispositions, kept as opaque {@code struct sigaction} bytes. */
    private record SignalHandlers(MemorySegment saved) {
        // struct sigaction is 152 bytes on x86_64 glibc; the handler pointer comes first
        private static final long SIGACTION_SIZE = 256;
        private static final int SIGKILL = 9;
        private static final int SIGSTOP = 19;
        private static final MethodHandle SIGACTION = LINKER.downcallHandle(
                LINKER.defaultLookup().find("sigaction").orElseThrow(),
                FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, ADDRESS));

        static SignalHandlers save() {
            MemorySegment all = Arena.ofAuto().allocate(SIGACTION_SIZE * 32);
            for (int sig = 1; sig < 32; sig++) {
                if (sig != SIGKILL && sig != SIGSTOP) {
                    invoke(SIGACTION, sig, MemorySegment.NULL, slot(all, sig));
                }
            }
            return new SignalHandlers(all);
        }

        /** Puts back every handler that changed since {@link #save()}; the others stay as the engine set them. */
        void restore() {
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment now = arena.allocate(SIGACTION_SIZE);
                for (int sig = 1; sig < 32; sig++) {
                    if (sig == SIGKILL || sig == SIGSTOP) {
                        continue;
                    }
                    invoke(SIGACTION, sig, MemorySegment.NULL, now);
                    MemorySegment before = slot(saved, sig);
                    if (now.get(JAVA_LONG, 0) != before.get(JAVA_LONG, 0)) {
                        invoke(SIGACTION, sig, before, MemorySegment.NULL);
                    }
                }
            }
        }

        private static MemorySegment slot(MemorySegment all, int sig) {
            return all.asSlice(SIGACTION_SIZE * sig, SIGACTION_SIZE);
        }
    }

    private static MethodHandle fn(SymbolLookup lib, String name, FunctionDescriptor descriptor) {
        return LINKER.downcallHandle(lib.find(name).orElseThrow(() ->
                new IllegalStateException("symbol " + name + " missing from libchdb; is it chDB 26.5 or newer?")),
                descriptor);
    }

    private static Object invoke(MethodHandle handle, Object... args) {
        try {
            return handle.invokeWithArguments(args);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }
}
