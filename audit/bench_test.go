package audit

import (
	"testing"
	"time"
)

// One record as an exec writes it, pruning included (a new Writer each
// time, as each command makes one).
func BenchmarkAppend(b *testing.B) {
	dir := b.TempDir()
	r := Record{Scope: "u1", Command: "exec", Lang: "sh", Code: "true", Stdout: "hi\n"}
	for b.Loop() {
		w := &Writer{Dir: dir, MaxCode: DefaultMaxCode, MaxOutput: DefaultMaxOutput, RetentionDays: 30}
		r.Time = time.Now()
		if err := w.Append(r); err != nil {
			b.Fatal(err)
		}
	}
}
