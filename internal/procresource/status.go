package procresource

import "bytes"

// StatusField returns the value of the first line of a /proc/<pid>/status
// file whose key is key ("NSpid", "Uid", "RssAnon"): the text after the
// colon, without the blanks around it. False when no line has that key
// (a key that only starts the same, "Uidx", is another key).
func StatusField(status []byte, key string) ([]byte, bool) {
	for line := range bytes.SplitSeq(status, []byte("\n")) {
		k, value, ok := bytes.Cut(line, []byte(":"))
		if ok && string(k) == key {
			return bytes.Trim(value, " \t\r"), true
		}
	}
	return nil, false
}
