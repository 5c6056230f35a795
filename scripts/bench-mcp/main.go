// Command bench-mcp times an MCP run_code round trip of `docker sandbox mcp`
// against `docker sandbox exec` of the same code in the same sandbox,
// interleaved (exec, mcp, exec, mcp, ...), and prints the medians, the p90
// and the ratio of medians. Run by scripts/bench-mcp.sh.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	n := flag.Int("n", 30, "timed runs of each")
	warm := flag.Int("warmup", 3, "untimed runs of each first")
	scope := flag.String("scope", "bench-mcp", "the scope")
	lang := flag.String("lang", "python", "the language")
	code := flag.String("code", "print(1)", "the code")
	target := flag.Float64("target", 1.0, "the target ratio, MCP / exec")
	flag.Parse()
	ctx := context.Background()

	srv := exec.Command("docker", "sandbox", "mcp", "--scope", *scope)
	srv.Stderr = os.Stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench-mcp", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: srv}, nil)
	if err != nil {
		fail("starting docker sandbox mcp: %v", err)
	}
	defer cs.Close()

	viaMCP := func() time.Duration {
		t0 := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"language": *lang, "code": *code}})
		d := time.Since(t0)
		if err != nil || res.IsError {
			raw, _ := json.Marshal(res)
			fail("run_code: %v %s", err, raw)
		}
		return d
	}
	viaExec := func() time.Duration {
		t0 := time.Now()
		out, err := exec.Command("docker", "sandbox", "exec", "-s", *scope, "--lang", *lang, "-c", *code).CombinedOutput()
		d := time.Since(t0)
		if err != nil {
			fail("exec: %v\n%s", err, out)
		}
		return d
	}
	for range *warm {
		viaExec()
		viaMCP()
	}
	var e, m []time.Duration
	for range *n {
		e = append(e, viaExec())
		m = append(m, viaMCP())
	}
	me, mm := median(e), median(m)
	ratio := float64(mm) / float64(me)
	verdict := "PASS"
	if ratio > *target {
		verdict = "MISS"
	}
	fmt.Printf("| %s %q, N=%d | median | p90 |\n|---|---|---|\n", *lang, *code, *n)
	fmt.Printf("| docker sandbox exec | %s | %s |\n", ms(me), ms(p90(e)))
	fmt.Printf("| MCP run_code round trip | %s | %s |\n", ms(mm), ms(p90(m)))
	fmt.Printf("\nratio MCP / exec (medians): %.2fx, target <= %.2fx: %s\n", ratio, *target, verdict)
}

func median(ds []time.Duration) time.Duration { return quantile(ds, 0.5) }
func p90(ds []time.Duration) time.Duration    { return quantile(ds, 0.9) }

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench-mcp: "+format+"\n", args...)
	os.Exit(1)
}
