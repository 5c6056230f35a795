package config

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

// The flags of a group are declared from the key table and applied in one
// loop: a given flag sets its key (source "flag --NAME"), an absent one
// leaves the key alone, a bad value is a CodeBadFlag error naming the flag.
func TestFlags(t *testing.T) {
	fs := pflag.NewFlagSet("exec", pflag.ContinueOnError)
	AddFlags(fs, FlagsRun, FlagsSandbox)
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	want := []string{"cpus", "disk", "idle-ttl", "image", "kernel", "kernel-reset", "max-lifetime", "max-output", "memory", "network", "nofile", "pids", "runtime", "timeout", "tmp-size"}
	if d := cmp.Diff(want, names); d != "" {
		t.Errorf("flags (-want +got):\n%s", d)
	}
	if fs.Lookup("max-size") != nil || fs.Lookup("base") != nil {
		t.Error("flags of other groups declared")
	}
	if err := fs.Parse([]string{"-m", "256m", "--timeout", "5s", "--tmp-size", "8m", "--nofile", "256", "--kernel"}); err != nil {
		t.Fatal(err)
	}
	c := Default()
	if err := c.SetFlags(fs); err != nil {
		t.Fatal(err)
	}
	if c.Memory != 256*MiB || c.Timeout != 5*time.Second || c.TmpSize != 8*MiB || c.Nofile != 256 || c.Pids != 256 || !c.Kernel || c.KernelReset {
		t.Errorf("got memory %d timeout %s tmp_size %d nofile %d pids %d", c.Memory, c.Timeout, c.TmpSize, c.Nofile, c.Pids)
	}
	for key, src := range map[string]string{"memory": "flag --memory", "tmp_size": "flag --tmp-size", "pids": "default"} {
		if got := c.Source(key).String(); got != src {
			t.Errorf("Source(%s) = %q, want %q", key, got, src)
		}
	}

	for _, tt := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--tmp-size", "lots"}, `invalid value "lots" for --tmp-size: not a size`},
		{[]string{"--tmp-size", "512k"}, `invalid value "512k" for --tmp-size: must be at least 1MiB`},
		{[]string{"--nofile", "10"}, `invalid value "10" for --nofile: must be at least 64`},
		{[]string{"--nofile", "x"}, `invalid value "x" for --nofile: not an integer`},
		{[]string{"--kernel=maybe"}, `invalid value "maybe" for --kernel: not a boolean (use true or false)`},
		{[]string{"--timeout", "2h"}, `invalid value "2h" for --timeout: must be at most max_timeout`},
	} {
		fs := pflag.NewFlagSet("exec", pflag.ContinueOnError)
		AddFlags(fs, FlagsRun, FlagsSandbox)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		err := Default().SetFlags(fs)
		checkErr(t, err, tt.wantErr)
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeBadFlag {
			t.Errorf("%v: error %#v is not a *Error with code %q", tt.args, err, CodeBadFlag)
		}
	}
}

// A flag of the same name that a verb declared itself is not a key's flag.
func TestSetFlagsOnlyDeclared(t *testing.T) {
	fs := pflag.NewFlagSet("stop", pflag.ContinueOnError)
	fs.String("timeout", "", "the verb's own")
	if err := fs.Parse([]string{"--timeout", "bogus"}); err != nil {
		t.Fatal(err)
	}
	c := Default()
	if err := c.SetFlags(fs); err != nil || c.Timeout != time.Minute {
		t.Errorf("SetFlags read an undeclared flag: %v, timeout %s", err, c.Timeout)
	}
	if err := c.SetFlags(nil); err != nil {
		t.Error(err)
	}
}

// Every flag of the table is unique and reads like the key.
func TestFlagTable(t *testing.T) {
	seen := map[string]string{}
	for _, d := range keyTable {
		if d.flag.name == "" {
			continue
		}
		if k, ok := seen[d.flag.name]; ok {
			t.Errorf("flag --%s of %q and %q", d.flag.name, k, d.name)
		}
		seen[d.flag.name] = d.name
		if d.flag.group == "" || d.flag.usage == "" || len(d.flag.short) > 1 {
			t.Errorf("key %q: incomplete flag %+v", d.name, d.flag)
		}
		if got := FlagName(d.name); got != "--"+d.flag.name {
			t.Errorf("FlagName(%q) = %q", d.name, got)
		}
	}
	if FlagName("max_sandboxes") != "" || FlagName("bogus") != "" {
		t.Error("FlagName of a key without a flag")
	}
	if got := FlagKeys(FlagsCopy); !cmp.Equal(got, []string{"copy_max_size", "copy_max_file_size", "copy_max_entries"}) {
		t.Errorf("FlagKeys(copy) = %v", got)
	}
}
