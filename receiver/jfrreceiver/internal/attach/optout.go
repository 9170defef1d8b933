package attach

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
)

// The owner's switches, read from the JVM itself. Either set to false
// (also "0", "no", "off", any case) keeps the receiver from starting a
// recording in that JVM.
const (
	// OptOutProperty is the system property: -Dotelcol.ai.jfr.attach=false
	// on the command line, in JAVA_TOOL_OPTIONS or in JDK_JAVA_OPTIONS.
	OptOutProperty = "otelcol.ai.jfr.attach"
	// OptOutEnv is the environment variable: OTELCOL_AI_JFR_ATTACH=false.
	OptOutEnv = "OTELCOL_AI_JFR_ATTACH"
)

// maxCmdline caps the command line read (the kernel allows about 2 MiB; a
// JVM's is a few KiB).
const maxCmdline = 256 << 10

// ProcessOptOut says whether the JVM's owner turned attaching off, and by
// what ("" when not). Its command line and environment are the process's
// to write: both are read with caps (procroot, procresource) and only
// compared, never interpreted further. A process that cannot be read is
// not opted out by this; it is not attached either (attach needs the same
// access). Reading a process's environ and cmdline blocks while its memory
// map is locked: the Recorder calls it in a goroutine of its own.
func ProcessOptOut(reader *procresource.Reader, pid int) string {
	if v, ok := reader.Getenv(pid, OptOutEnv); ok && isOff(v) {
		return "environment " + OptOutEnv + "=" + strings.TrimSpace(v)
	}
	env, cmd := jvmOptions(reader, pid)
	value, found := PropertyValue(env, OptOutProperty)
	// The command line comes after those options, and wins.
	if v, ok := PropertyValue(cmd, OptOutProperty); ok {
		value, found = v, true
	}
	if found && isOff(value) {
		return "system property -D" + OptOutProperty + "=" + value
	}
	return ""
}

// AttachDisabled reports whether the JVM runs with
// -XX:+DisableAttachMechanism (the last of -XX:± winning, the command line
// after the environment's options): SIGQUIT would only make it print a
// thread dump.
func AttachDisabled(reader *procresource.Reader, pid int) bool {
	env, cmd := jvmOptions(reader, pid)
	disabled := false
	for _, args := range [][]string{env, cmd} {
		for _, a := range jvmArgs(args) {
			switch a {
			case "-XX:+DisableAttachMechanism":
				disabled = true
			case "-XX:-DisableAttachMechanism":
				disabled = false
			}
		}
	}
	return disabled
}

// jvmOptions returns the options the JVM takes from JAVA_TOOL_OPTIONS and
// JDK_JAVA_OPTIONS, and its command line without the launcher.
func jvmOptions(reader *procresource.Reader, pid int) (env, cmd []string) {
	for _, name := range []string{"JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS"} {
		if v, ok := reader.Getenv(pid, name); ok {
			env = append(env, strings.Fields(v)...)
		}
	}
	raw, err := procroot.ReadProcFile(filepath.Join(reader.Root(), strconv.Itoa(pid), "cmdline"), maxCmdline)
	if args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00"); err == nil && len(args) > 1 {
		cmd = args[1:]
	}
	return env, cmd
}

// jvmArgs returns the leading arguments that are the JVM's: those before
// the main class, source file, -jar or -m, without the values of options
// that take the next argument (-cp and the like).
func jvmArgs(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case takesValue(a):
			i++
		case a == "-jar" || a == "-m" || a == "--module" || !strings.HasPrefix(a, "-"):
			return out // the program's arguments follow
		default:
			out = append(out, a)
		}
	}
	return out
}

func takesValue(a string) bool {
	switch a {
	case "-cp", "-classpath", "--class-path", "-p", "--module-path",
		"--add-modules", "--add-opens", "--add-exports", "--add-reads", "--enable-native-access":
		return true
	}
	return false
}

// PropertyValue returns the value of the system property name set by -D in
// a JVM's options (its command line without the launcher), the last one
// winning as in the JVM. Arguments after the main class, source file, -jar
// or -m are the program's, not the JVM's, and are not looked at (-cp,
// --module-path and the like take the next argument).
func PropertyValue(args []string, name string) (string, bool) {
	prefix := "-D" + name + "="
	var value string
	found := false
	for _, a := range jvmArgs(args) {
		switch {
		case strings.HasPrefix(a, prefix):
			value, found = a[len(prefix):], true
		case a == "-D"+name:
			value, found = "", true
		}
	}
	return value, found
}

func isOff(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "false", "0", "no", "off":
		return true
	}
	return false
}
