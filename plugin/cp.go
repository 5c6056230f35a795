package plugin

import (
	"context"
	"fmt"
	"io"

	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/files"
	"github.com/docker-sandbox/docker-sandbox/files/tarsafe"
	"github.com/docker-sandbox/docker-sandbox/plugin/config"
)

type cpOptions struct {
	archive bool
	strict  bool
	format  string
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
on the destination; absolute names, ".." and links in the destination that
lead out are refused (path_escape), devices and FIFOs are skipped,
setuid/setgid/sticky bits are stripped, and the size and entry caps stop the
copy (too_large). A refused copy leaves nothing it wrote behind.

Symbolic links that stay inside the copied tree are copied as links. A link
that leads outside it (an absolute target such as a virtualenv's
bin/python -> /usr/bin/python3, or one that climbs out with "..") is not
written and is reported, one line on stderr each ("skipped" in JSON), and
the rest of the copy completes; --strict refuses the whole copy instead. The
same rule holds in every direction, and for "-" as DST.`,
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
			out := dockerCli.Out()
			a, err := parseCpArgs(args[0], args[1], o.format)
			if err != nil {
				return fail(out, o.format, err)
			}
			c, err := loadConfig()
			if err != nil {
				return fail(out, o.format, err)
			}
			limits, err := copyLimits(c, cmd.Flags())
			if err != nil {
				return fail(out, o.format, err)
			}
			ctx, cancel := interruptible(cmd.Context())
			defer cancel()
			if err := resolveConfigRuntime(ctx, engineAPI(dockerCli), c); err != nil {
				return fail(out, o.format, err)
			}
			cp := copier(dockerCli, c, limits, o.archive)
			cp.Strict = o.strict
			au, rc := newAuditor(dockerCli, c), &recordingCopier{sandboxCopier: cp}
			err = runCp(ctx, rc, dockerCli.In(), out, dockerCli.Err(), a, o.format)
			au.recordEach(cpRecords(a, rc.res, err), nil, nil)
			return fail(out, o.format, err)
		},
		ValidArgsFunction: completeLocations(dockerCli, 2, true),
	}
	cmd.SetFlagErrorFunc(flagError)
	f := cmd.Flags()
	f.BoolVarP(&o.archive, "archive", "a", false, "Keep permission bits exactly (setuid, setgid and sticky bits are always removed)")
	f.BoolVar(&o.strict, "strict", false, "Refuse the whole copy (path_escape) when a symbolic link leads outside the copied tree, instead of skipping that link")
	config.AddFlags(f, config.FlagsCopy)
	f.StringVar(&o.format, "format", "", "Output format: json or a Go template (default: quiet)")
	return cmd
}

// cpJSON is the --format json schema of cp.
type cpJSON struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
	*tarsafe.Result
}

// cpArgs are cp's SRC and DST, as given and parsed.
type cpArgs struct {
	srcArg, dstArg string
	src, dst       files.Location
}

// parseCpArgs parses SRC and DST: a host path, - or SCOPE[/SESSION]:PATH.
// --format cannot print when DST is - (standard output is the tar stream).
func parseCpArgs(srcArg, dstArg, format string) (cpArgs, error) {
	a := cpArgs{srcArg: srcArg, dstArg: dstArg}
	var err error
	if a.src, err = files.ParseLocation(srcArg); err != nil {
		return a, err
	}
	if a.dst, err = files.ParseLocation(dstArg); err != nil {
		return a, err
	}
	if a.dst.Kind == files.Stdio && format != "" {
		return a, core.Errorf(core.CodeBadFlag, "--format cannot be used when DST is - (standard output carries the tar stream)")
	}
	return a, nil
}

// sandboxCopier is what cp asks of the files copier.
type sandboxCopier interface {
	Copy(ctx context.Context, src, dst files.Location, stdin io.Reader, stdout io.Writer) (*tarsafe.Result, error)
}

// runCp copies, says on errOut what it skipped or changed, and with
// --format prints the result.
func runCp(ctx context.Context, cp sandboxCopier, in io.Reader, out, errOut io.Writer, a cpArgs, format string) error {
	res, err := cp.Copy(ctx, a.src, a.dst, in, out)
	if err != nil {
		return err
	}
	printCopyReport(errOut, res)
	if format == "" {
		return nil
	}
	return writeFormatted(out, format, cpJSON{Source: a.srcArg, Destination: a.dstArg, Result: res}, nil)
}

// printCopyReport prints, one line each, the entries a copy skipped and
// those whose setuid, setgid or sticky bits it removed. Names, types, link
// targets and reasons come from the sandbox (or a helper it may have taken
// over): they are quoted for the terminal.
func printCopyReport(errOut io.Writer, res *tarsafe.Result) {
	for _, s := range res.Skipped {
		typ := core.TermText(s.Type)
		if s.LinkTarget != "" || s.LinkTargetBytes != nil {
			typ += " -> " + termBytes(s.LinkTarget, s.LinkTargetBytes)
		}
		fmt.Fprintf(errOut, "docker sandbox: skipped %s (%s): %s\n", termBytes(s.Name, s.NameBytes), typ, core.TermText(s.Reason))
	}
	if n := res.SkippedCount - int64(len(res.Skipped)); n > 0 {
		fmt.Fprintf(errOut, "docker sandbox: skipped %d more entries\n", n)
	}
	for _, s := range res.Stripped {
		fmt.Fprintf(errOut, "docker sandbox: removed the setuid/setgid/sticky bits of %s\n", core.TermText(s))
	}
	if n := res.StrippedCount - int64(len(res.Stripped)); n > 0 {
		fmt.Fprintf(errOut, "docker sandbox: removed the setuid/setgid/sticky bits of %d more entries\n", n)
	}
}
