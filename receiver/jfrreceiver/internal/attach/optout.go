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
// access).
func ProcessOptOut(reader *procresource.Reader, pid int) string {
	if v, ok := reader.Getenv(pid, OptOutEnv); ok && isOff(v) {
		return "environment " + OptOutEnv + "=" + strings.TrimSpace(v)
	}
	var opts []string
	for _, env := range []string{"JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS"} {
		if v, ok := reader.Getenv(pid, env); ok {
			opts = append(opts, strings.Fields(v)...)
		}
	}
	value, found := PropertyValue(opts, OptOutProperty)
	// The command line comes after those options, and wins.
	raw, err := procroot.ReadProcFile(filepath.Join(reader.Root(), strconv.Itoa(pid), "cmdline"), maxCmdline)
	if args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00"); err == nil && len(args) > 1 {
		if v, ok := PropertyValue(args[1:], OptOutProperty); ok {
			value, found = v, true
		}
	}
	if found && isOff(value) {
		return "system property -D" + OptOutProperty + "=" + value
	}
	return ""
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
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case strings.HasPrefix(a, prefix):
			value, found = a[len(prefix):], true
		case a == "-D"+name:
			value, found = "", true
		case a == "-cp" || a == "-classpath" || a == "--class-path" || a == "-p" || a == "--module-path" ||
			a == "--add-modules" || a == "--add-opens" || a == "--add-exports" || a == "--add-reads" || a == "--enable-native-access":
			i++ // takes the next argument
		case a == "-jar" || a == "-m" || a == "--module":
			return value, found // the program's arguments follow
		case !strings.HasPrefix(a, "-"):
			return value, found // the main class or source file
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
