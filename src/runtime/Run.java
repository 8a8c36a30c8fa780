// petri's Java runner (docs/languages.md), /opt/petri/Run.java in a sandbox:
// `java /opt/petri/Run.java FILE`.  The code is jshell's: statements,
// declarations, methods and classes, one after the other, as jshell runs
// them, in this JVM (JShell's local execution engine).  What they print
// goes out as it comes; the value of the last expression is the result
// (main.txt in $PETRI_RESULTS); a compile error or an exception ends the
// run as the execution's error (error.json), its trace on stderr.
//
// As E2B's Java kernel has it, each variable of the environment is also a
// system property (System.getProperty("NAME")), but for those Java sets.
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.stream.Collectors;

import jdk.jshell.Diag;
import jdk.jshell.EvalException;
import jdk.jshell.ExpressionSnippet;
import jdk.jshell.JShell;
import jdk.jshell.JShellException;
import jdk.jshell.Snippet;
import jdk.jshell.SnippetEvent;
import jdk.jshell.SourceCodeAnalysis;
import jdk.jshell.VarSnippet;

public class Run {
    public static void main(String[] args) throws IOException {
        String code = Files.readString(Path.of(args[0]), StandardCharsets.UTF_8);
        String results = System.getenv("PETRI_RESULTS");
        for (Map.Entry<String, String> e : System.getenv().entrySet())
            if (System.getProperty(e.getKey()) == null)
                System.setProperty(e.getKey(), e.getValue());
        JShell shell = JShell.builder().executionEngine("local").out(System.out)
                .err(System.err).build();
        SourceCodeAnalysis analysis = shell.sourceCodeAnalysis();
        String rest = code, value = null;
        while (!rest.isBlank()) {
            SourceCodeAnalysis.CompletionInfo info = analysis.analyzeCompletion(rest);
            String source = info.source();
            if (info.completeness() == SourceCodeAnalysis.Completeness.EMPTY)
                break;
            if (source == null || !info.completeness().isComplete()) {
                source = rest;      // the compiler says what is missing
                rest = "";
            } else {
                rest = info.remaining();
            }
            value = null;
            for (SnippetEvent ev : shell.eval(source)) {
                if (ev.causeSnippet() != null)
                    continue;       // what a snippet changed of earlier ones
                if (ev.exception() != null)
                    fail(results, ev.exception());
                if (ev.status() == Snippet.Status.REJECTED)
                    rejected(results, shell, ev.snippet());
                value = valueOf(ev);
            }
        }
        System.out.flush();
        if (value != null && results != null)    // a lone surrogate: replaced, not an error
            Files.write(Path.of(results, "main.txt"), value.getBytes(StandardCharsets.UTF_8));
        shell.close();
        System.exit(0);
    }

    // The value an expression left, as a notebook shows it: a String's
    // text, not its literal; a declaration's or a statement's, none.
    static String valueOf(SnippetEvent ev) {
        Snippet s = ev.snippet();
        String v = ev.value();
        if (v == null || s.kind() != Snippet.Kind.VAR && s.kind() != Snippet.Kind.EXPRESSION)
            return null;
        if (s.subKind() != Snippet.SubKind.TEMP_VAR_EXPRESSION_SUBKIND
                && s.subKind() != Snippet.SubKind.VAR_VALUE_SUBKIND
                && s.kind() != Snippet.Kind.EXPRESSION)
            return null;
        String type = s instanceof VarSnippet ? ((VarSnippet) s).typeName()
                : s instanceof ExpressionSnippet ? ((ExpressionSnippet) s).typeName() : "";
        if (type.equals("String") && v.length() >= 2 && v.startsWith("\"") && v.endsWith("\""))
            return unquote(v.substring(1, v.length() - 1));
        return v;
    }

    static String unquote(String s) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c != '\\' || i + 1 == s.length()) {
                b.append(c);
                continue;
            }
            char n = s.charAt(++i);
            switch (n) {
            case 'n': b.append('\n'); break;
            case 't': b.append('\t'); break;
            case 'r': b.append('\r'); break;
            case 'b': b.append('\b'); break;
            case 'f': b.append('\f'); break;
            case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': {
                int v = 0, k = 0;       // jshell writes a control character as octal
                while (k < 3 && i < s.length() && s.charAt(i) >= '0' && s.charAt(i) <= '7') {
                    v = v * 8 + (s.charAt(i++) - '0');
                    k++;
                }
                i--;
                b.append((char) v);
                break;
            }
            case 'u':
                if (i + 4 < s.length()) {
                    b.append((char) Integer.parseInt(s.substring(i + 1, i + 5), 16));
                    i += 4;
                }
                break;
            default: b.append(n);
            }
        }
        return b.toString();
    }

    static void rejected(String results, JShell shell, Snippet s) throws IOException {
        String message = shell.diagnostics(s).filter(Diag::isError)
                .map(d -> d.getMessage(null)).collect(Collectors.joining("\n"));
        if (message.isEmpty())
            message = "the snippet cannot be compiled: " + s.source().strip();
        System.err.println("error: " + message);
        error(results, "CompilationError", message, "error: " + message + "\n" + s.source());
    }

    static void fail(String results, JShellException x) throws IOException {
        if (!(x instanceof EvalException)) {    // a method whose body is not there yet
            System.err.println("error: " + x.getMessage());
            error(results, "UnresolvedReference", String.valueOf(x.getMessage()),
                  "error: " + x.getMessage());
        }
        EvalException e = (EvalException) x;
        StringBuilder trace = new StringBuilder(e.getExceptionClassName());
        if (e.getMessage() != null)
            trace.append(": ").append(e.getMessage());
        for (StackTraceElement f : e.getStackTrace())
            if (!f.getClassName().startsWith("jdk.jshell.") && !f.getClassName().equals("Run"))
                trace.append("\n\tat ").append(f);
        System.out.flush();
        System.err.println(trace);
        String name = e.getExceptionClassName();
        error(results, name.substring(name.lastIndexOf('.') + 1),
              e.getMessage() == null ? "" : e.getMessage(), trace.toString());
    }

    static void error(String results, String name, String message, String traceback)
            throws IOException {
        // Within what the driver reads of it (its caps: docs/languages.md).
        if (results != null)
            Files.writeString(Path.of(results, "error.json"), "{\"name\": " + json(cut(name, 256))
                    + ", \"message\": " + json(cut(message, 64 << 10)) + ", \"traceback\": "
                    + json(cut(traceback, 256 << 10)) + "}", StandardCharsets.UTF_8);
        System.exit(1);
    }

    static String cut(String s, int max) {
        return s.length() <= max ? s : s.substring(0, max) + "\n[cut at " + max + " characters]";
    }

    static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\')
                b.append('\\').append(c);
            else if (c < 0x20 || Character.isSurrogate(c))
                b.append(String.format("\\u%04x", (int) c));
            else
                b.append(c);
        }
        return b.append('"').toString();
    }
}
