package config

import (
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr string // substring; "" means no error
	}{
		{in: "0", want: 0},
		{in: "1048576", want: 1048576},
		{in: "64k", want: 64 * KiB},
		{in: "64K", want: 64 * KiB},
		{in: "512m", want: 512 * MiB},
		{in: "1g", want: GiB},
		{in: "1G", want: GiB},
		{in: "1GiB", want: GiB},
		{in: "1gib", want: GiB},
		{in: "1gb", want: GiB},
		{in: "128MiB", want: 128 * MiB},
		{in: "2t", want: 2 * TiB},
		{in: "1.5g", want: GiB + GiB/2},
		{in: " 1 g ", want: GiB},
		{in: "100b", want: 100},
		{in: "100B", want: 100},
		{in: "+1k", want: KiB},
		{in: "8388607t", want: 8388607 * TiB},
		{in: "", wantErr: `"" is not a size (use e.g. 512m, 1g)`},
		{in: "-1m", wantErr: `"-1m" must not be negative`},
		{in: "1x", wantErr: `"1x" is not a size`},
		{in: "12 parsecs", wantErr: `"12 parsecs" is not a size (use e.g. 512m, 1g)`},
		{in: "99999999999t", wantErr: `"99999999999t" is too large`},
		{in: "8388608t", wantErr: "is too large"},
		{in: "99999999999999999999", wantErr: "is too large"},
		{in: "1.5", wantErr: "is not a size"},
		{in: "10ib", wantErr: "is not a size"},
		{in: "g", wantErr: "is not a size"},
		{in: ".5g", wantErr: "is not a size"},
		{in: "1gg", wantErr: "is not a size"},
		{in: "1p", wantErr: "is not a size"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSize(tt.in)
			checkErr(t, err, tt.wantErr)
			if err == nil && got != tt.want {
				t.Errorf("ParseSize(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{in: "0", want: 0},
		{in: "90s", want: 90 * time.Second},
		{in: "10m", want: 10 * time.Minute},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "1.5h", want: 90 * time.Minute},
		{in: " 250ms ", want: 250 * time.Millisecond},
		{in: "", wantErr: `"" is not a duration (use e.g. 90s, 10m, 1h30m)`},
		{in: "-1m", wantErr: `"-1m" must not be negative`},
		{in: "1x", wantErr: `"1x" is not a duration`},
		{in: "30", wantErr: `"30" is not a duration: a unit is missing`},
		{in: "99999999999t", wantErr: "is not a duration"},
		{in: "99999999999h", wantErr: "is not a duration"},
		{in: "soon", wantErr: "is not a duration"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDuration(tt.in)
			checkErr(t, err, tt.wantErr)
			if err == nil && got != tt.want {
				t.Errorf("ParseDuration(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	sizes := map[int64]string{0: "0 bytes", 1: "1 byte", 1000: "1000 bytes", KiB: "1KiB", 6 * MiB: "6MiB", 16 * GiB: "16GiB", 1536 * MiB: "1536MiB", TiB: "1TiB"}
	for n, want := range sizes {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
	}
	durs := map[time.Duration]string{0: "0s", time.Hour: "1h", time.Minute: "1m", 90 * time.Second: "1m30s", 720 * time.Hour: "720h", time.Hour + time.Second: "1h0m1s"}
	for d, want := range durs {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// checkErr fails unless err is nil and want is "", or err contains want.
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && err == nil:
		t.Fatalf("no error, want one containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %q does not contain %q", err, want)
	}
}
