package plugin

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/docker/cli/cli/command"
	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/files"
	"github.com/docker-sandbox/docker-sandbox/files/tarsafe"
	"github.com/docker-sandbox/docker-sandbox/images"
	"github.com/docker-sandbox/docker-sandbox/plugin/config"
)

type cpOptions struct {
	archive     bool
	maxSize     string
	maxFileSize string
	maxEntries  int64
	format      string
}

func newCpCommand(dockerCli command.Cli) *cobra.Command {
	var o cpOptions
	cmd := &cobra.Command{
		Use:   "cp [OPTIONS] SRC DST",
		Short: "Copy files and folders between the host and sandboxes, or between sandboxes",
		Long: `Copy files and folders between the host and sandboxes, or between sandboxes,
with docker cp's rules. A sandbox path is SCOPE[/SESSION]:PATH: a relative PATH
is under /opt/workspace, an absolute one must lie under /opt/workspace or
/opt/user. "-" as SRC reads a tar stream from standard input and extracts it
into the folder DST; "-" as DST writes a tar stream to standard output.

What a sandbox sends is treated as hostile: it is extracted through os.Root
on the destination; absolute names, "..", links leading out and links in the
destination that lead out are refused (path_escape), devices and FIFOs are
skipped, setuid/setgid/sticky bits are stripped, and the size and entry caps
stop the copy (too_large). A refused copy leaves nothing it wrote behind.`,
		Example: `  docker sandbox cp ./src u1:src                 # host folder -> /opt/workspace/src
  docker sandbox cp u1/chatA:out/report.pdf .     # a session's file -> ./report.pdf
  docker sandbox cp u1:results/. ./results        # a folder's contents
  docker sandbox cp u1:data u2:data               # sandbox to sandbox, streamed
  tar -C dir -c . | docker sandbox cp - u1:dir    # a tar stream into a folder
  docker sandbox cp u1:logs - | tar -t            # a tar stream out`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageError(cmd, "%q requires exactly 2 arguments: SRC and DST", cmd.CommandPath())
			}
			return fail(dockerCli.Out(), o.format, runCp(cmd.Context(), dockerCli, args[0], args[1], o))
		},
	}
	cmd.SetFlagErrorFunc(flagError)
	f := cmd.Flags()
	f.BoolVarP(&o.archive, "archive", "a", false, "Keep permission bits exactly (setuid, setgid and sticky bits are always removed)")
	addLimitFlags(cmd, &o.maxSize, &o.maxFileSize, &o.maxEntries)
	f.StringVar(&o.format, "format", "", "Output format: json or a Go template (default: quiet)")
	return cmd
}

func addLimitFlags(cmd *cobra.Command, maxSize, maxFileSize *string, maxEntries *int64) {
	f := cmd.Flags()
	f.StringVar(maxSize, "max-size", "2GiB", "Stop the copy when its files add up to more than this")
	f.StringVar(maxFileSize, "max-file-size", "", "Stop the copy at a file larger than this (default: --max-size)")
	f.Int64Var(maxEntries, "max-entries", tarsafe.DefaultMaxEntries, "Stop the copy at more entries (files, folders, links) than this")
}

func parseLimits(maxSize, maxFileSize string, maxEntries int64) (tarsafe.Limits, error) {
	var l tarsafe.Limits
	size := func(flag, v string) (int64, error) {
		if v == "" {
			return 0, nil
		}
		n, err := units.RAMInBytes(v)
		if err != nil || n <= 0 {
			return 0, sbexec.Errorf(sbexec.CodeBadFlag, "invalid --%s %q: want a size such as 512m, 2g or 2GiB", flag, v)
		}
		return n, nil
	}
	var err error
	if l.MaxBytes, err = size("max-size", maxSize); err != nil {
		return l, err
	}
	if l.MaxEntryBytes, err = size("max-file-size", maxFileSize); err != nil {
		return l, err
	}
	if maxEntries <= 0 {
		return l, sbexec.Errorf(sbexec.CodeBadFlag, "invalid --max-entries %d: want a positive number", maxEntries)
	}
	l.MaxEntries = maxEntries
	return l, nil
}

// cpJSON is the --format json schema of cp.
type cpJSON struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
	*tarsafe.Result
}

// copier returns the files copier for the CLI's engine; sandboxes it has to
// create get the configuration's settings, as with exec.
func copier(dockerCli command.Cli, c *config.Config, limits tarsafe.Limits, keepMode bool) *files.Copier {
	m := manager(dockerCli, c)
	b := builder(dockerCli, c)
	return &files.Copier{
		Runner: m,
		Spec: func(t sbexec.Target) sbexec.Spec {
			img := c.Image
			if img == "" {
				img = b.RuntimeRef()
			}
			return sbexec.Spec{
				Target: t, Image: img, Network: c.Network, Memory: c.Memory, CPUs: c.CPUs, Pids: c.Pids,
				Nofile: c.Nofile, TmpSize: c.TmpSize, IdleTTL: c.IdleTTL, Runtime: c.Runtime,
				HelperID: images.HelperID(), Version: Version,
			}
		},
		Limits: limits, KeepMode: keepMode, Umask: files.Umask(),
	}
}

// interruptible cancels ctx on Ctrl-C or SIGTERM, so that a copy in
// progress removes what it wrote.
func interruptible(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

func runCp(ctx context.Context, dockerCli command.Cli, srcArg, dstArg string, o cpOptions) error {
	limits, err := parseLimits(o.maxSize, o.maxFileSize, o.maxEntries)
	if err != nil {
		return err
	}
	src, err := files.ParseLocation(srcArg)
	if err != nil {
		return err
	}
	dst, err := files.ParseLocation(dstArg)
	if err != nil {
		return err
	}
	if dst.Kind == files.Stdio && o.format != "" {
		return sbexec.Errorf(sbexec.CodeBadFlag, "--format cannot be used when DST is - (standard output carries the tar stream)")
	}
	c, err := loadConfig()
	if err != nil {
		return err
	}
	ctx, cancel := interruptible(ctx)
	defer cancel()
	cp := copier(dockerCli, c, limits, o.archive)
	res, err := cp.Copy(ctx, src, dst, dockerCli.In(), dockerCli.Out())
	if err != nil {
		return err
	}
	errOut := dockerCli.Err()
	for _, s := range res.Skipped {
		fmt.Fprintf(errOut, "docker sandbox: skipped %s (%s): %s\n", s.Name, s.Type, s.Reason)
	}
	if n := res.SkippedCount - int64(len(res.Skipped)); n > 0 {
		fmt.Fprintf(errOut, "docker sandbox: skipped %d more entries\n", n)
	}
	for _, s := range res.Stripped {
		fmt.Fprintf(errOut, "docker sandbox: removed the setuid/setgid/sticky bits of %s\n", s)
	}
	if n := res.StrippedCount - int64(len(res.Stripped)); n > 0 {
		fmt.Fprintf(errOut, "docker sandbox: removed the setuid/setgid/sticky bits of %d more entries\n", n)
	}
	if o.format == "" {
		return nil
	}
	return writeFormatted(dockerCli.Out(), o.format, cpJSON{Source: srcArg, Destination: dstArg, Result: res}, nil)
}
