package plugin

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

type fakePruner struct {
	rep sbexec.PruneReport
	got []sbexec.PruneOptions
}

func (f *fakePruner) Prune(ctx context.Context, o sbexec.PruneOptions) (sbexec.PruneReport, error) {
	f.got = append(f.got, o)
	return f.rep, nil
}

func TestPruneOptions(t *testing.T) {
	for _, tc := range []struct {
		o            pruneOptions
		olderThanSet bool
		grace        string
		graceSet     bool
		want         sbexec.PruneOptions
		err          string
	}{
		{want: sbexec.PruneOptions{Grace: time.Minute}},
		{o: pruneOptions{dryRun: true, olderThan: "168h", filters: []string{"label=a", "label=b=c"}}, olderThanSet: true,
			want: sbexec.PruneOptions{DryRun: true, OlderThan: 168 * time.Hour, DataAge: true, Labels: []string{"a", "b=c"}, Grace: time.Minute}},
		{grace: "0s", graceSet: true, want: sbexec.PruneOptions{}},
		{grace: "", graceSet: true, want: sbexec.PruneOptions{Grace: time.Minute}},
		{o: pruneOptions{olderThan: "soon"}, olderThanSet: true, err: "--older-than"},
		{o: pruneOptions{olderThan: "-1h"}, olderThanSet: true, err: "--older-than"},
		{o: pruneOptions{filters: []string{"scope=u1"}}, err: "label=KEY"},
		{o: pruneOptions{filters: []string{"label="}}, err: "label=KEY"},
		{grace: "x", graceSet: true, err: pruneGraceEnv},
	} {
		got, err := tc.o.pruneOptions(tc.olderThanSet, tc.grace, tc.graceSet)
		if tc.err != "" {
			if err == nil || core.AsError(err).Code != core.CodeBadFlag || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%+v: %v, want bad_flag naming %s", tc.o, err, tc.err)
			}
			continue
		}
		if d := cmp.Diff(tc.want, got); err != nil || d != "" {
			t.Errorf("%+v: %v %s", tc.o, err, d)
		}
	}
}

func TestPrune(t *testing.T) {
	rep := sbexec.PruneReport{Objects: []sbexec.PruneItem{
		{Type: "container", Name: "docker-sandbox-u1", Reason: "exited"},
		{Type: "network", Name: "docker-sandbox.net.x", Reason: "no sandbox", Error: "in use"},
	}, Kept: []sbexec.PruneItem{{Type: "volume", Name: "docker-sandbox-u2.user", Reason: "last written unknown"}}}
	po := sbexec.PruneOptions{Grace: time.Minute, KeepVolumes: []string{"docker-sandbox.helper.x"}}

	// No -f: the question; anything but y or yes cancels, nothing pruned.
	for _, answer := range []string{"", "n\n", "no\n", "yess\n"} {
		f := &fakePruner{rep: rep}
		var out, errOut bytes.Buffer
		err := runPrune(context.Background(), f, strings.NewReader(answer), &out, &errOut, po, pruneOptions{})
		if core.AsError(err).Code != core.CodeBadFlag || len(f.got) != 0 || !strings.Contains(errOut.String(), "Are you sure you want to continue? [y/N]") {
			t.Errorf("answer %q: %v, pruned %v, asked %q", answer, err, f.got, errOut.String())
		}
	}
	for _, answer := range []string{"y\n", " YES \n"} {
		f := &fakePruner{}
		if err := runPrune(context.Background(), f, strings.NewReader(answer), &bytes.Buffer{}, &bytes.Buffer{}, po, pruneOptions{}); err != nil || len(f.got) != 1 {
			t.Errorf("answer %q: %v, pruned %v", answer, err, f.got)
		}
	}
	// -f: no question; the report, a failed object: exit 125 with its error.
	f := &fakePruner{rep: rep}
	var out, errOut bytes.Buffer
	err := runPrune(context.Background(), f, strings.NewReader(""), &out, &errOut, po, pruneOptions{force: true})
	wantExit(t, err, 125)
	if d := cmp.Diff([]sbexec.PruneOptions{po}, f.got); d != "" {
		t.Error(d)
	}
	if d := cmp.Diff("TYPE        NAME                REASON\ncontainer   docker-sandbox-u1   exited\nRemoved 1 object(s)\n", out.String()); d != "" {
		t.Error(d)
	}
	if d := cmp.Diff("docker sandbox: volume docker-sandbox-u2.user last written unknown\ndocker sandbox: prune could not remove 1 object(s): network docker-sandbox.net.x: in use\n", errOut.String()); d != "" {
		t.Error(d)
	}
	// --dry-run: no question, what would go.
	out.Reset()
	f = &fakePruner{rep: sbexec.PruneReport{DryRun: true, Objects: []sbexec.PruneItem{}}}
	if err := runPrune(context.Background(), f, strings.NewReader(""), &out, &bytes.Buffer{}, po, pruneOptions{dryRun: true, format: "{{.dry_run}} {{len .objects}}"}); err != nil || out.String() != "true 0\n" {
		t.Errorf("%v %q", err, out.String())
	}
}
