package inside

import (
	"testing"
	"time"
)

// TestTakeExitPrefersWaitingStatus: a main child's status that is already
// waiting is always taken, even when the wait's timer is ready as well (a
// select with both ready picks at random: "could not be killed" for a
// program that was killed and reaped, TestControlDiskLimit once in CI).
func TestTakeExitPrefersWaitingStatus(t *testing.T) {
	for i := range 2000 {
		ch := make(chan childExit, 1)
		ch <- childExit{at: time.Unix(int64(i), 0)}
		ex, ok := takeExit(ch, childExit{}, false, time.Nanosecond)
		if !ok || ex.at.Unix() != int64(i) {
			t.Fatalf("round %d: the waiting status was not taken (ok %v)", i, ok)
		}
	}
	if _, ok := takeExit(make(chan childExit), childExit{}, false, time.Millisecond); ok {
		t.Fatal("a status was taken from an empty channel")
	}
	ex := childExit{at: time.Unix(7, 0)}
	if got, ok := takeExit(make(chan childExit), ex, true, 0); !ok || got != ex {
		t.Fatal("an exit already got was lost")
	}
}
