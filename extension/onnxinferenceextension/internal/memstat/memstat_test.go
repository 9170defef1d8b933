package memstat

import "testing"

func TestReadsPlausibleValues(t *testing.T) {
	rss, err := RSS()
	if err != nil {
		t.Fatal(err)
	}
	if rss < 1<<20 {
		t.Fatalf("RSS %d bytes: implausibly small", rss)
	}
	if heap := CHeapInUse(); heap == 0 {
		t.Fatal("C heap in use is 0; want a count or -1 (unknown)")
	}
	TrimCHeap()
}
