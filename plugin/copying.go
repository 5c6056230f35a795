package plugin

// What cp and files share: the copier, its limits, and how names from a
// sandbox are shown.

import (
	"context"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/docker/cli/cli/command"
	"github.com/spf13/pflag"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/files"
	"github.com/docker-sandbox/docker-sandbox/files/tarsafe"
	"github.com/docker-sandbox/docker-sandbox/plugin/config"
)

// copyLimits are the caps of a copy: the configuration's copy_max_size,
// copy_max_file_size and copy_max_entries, with the flags given on this
// call (flags nil: none) over them, checked as the configuration checks
// them.
func copyLimits(c *config.Config, flags *pflag.FlagSet) (tarsafe.Limits, error) {
	if err := applyFlags(flags, c); err != nil {
		return tarsafe.Limits{}, err
	}
	return tarsafe.Limits{MaxBytes: c.CopyMaxSize, MaxEntryBytes: c.CopyMaxFileSize, MaxEntries: c.CopyMaxEntries}, nil
}

// copier returns the files copier for the CLI's engine; sandboxes it has to
// create get the configuration's settings, as with exec.
func copier(dockerCli command.Cli, c *config.Config, limits tarsafe.Limits, keepMode bool) *files.Copier {
	m := manager(dockerCli, c)
	b := builder(dockerCli, c)
	cp := &files.Copier{
		Runner: checkedRunner{Runner: m, engine: engineAPI(dockerCli), src: c.Source("network")},
		Spec:   func(t core.Target) sbexec.Spec { return sandboxSpec(c, b, t) },
		Limits: limits, KeepMode: keepMode, Umask: files.Umask(),
	}
	if c.CopyLocal && strings.HasPrefix(engineEndpoint(dockerCli).Host, "unix://") {
		cp.Direct = append(cp.Direct, &files.LocalReader{Engine: engineAPI(dockerCli)})
	}
	if c.CopyFrozen {
		cp.Direct = append(cp.Direct, &sbexec.FrozenReader{Engine: engineAPI(dockerCli)})
	}
	return cp
}

// termBytes is a name from a sandbox for the terminal: its exact bytes
// when it is not UTF-8 (exact is then set), quoted when needed.
func termBytes(s string, exact []byte) string {
	if exact != nil {
		s = string(exact)
	}
	return core.TermText(s)
}

// interruptible cancels ctx on Ctrl-C or SIGTERM, so that a copy in
// progress removes what it wrote.
func interruptible(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}
