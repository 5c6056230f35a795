package plugin

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/docker/cli/cli/command"
	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/audit"
	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/files"
	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
)

// filesOptions are the flags every files subcommand takes.
type filesOptions struct {
	scope     string
	session   string
	format    string
	recursive bool
	force     bool
	mode      string
}

func newFilesCommand(dockerCli command.Cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "files COMMAND",
		Short: "List, read, write and delete single paths in a sandbox",
		Long: `List, read, write and delete single paths in a sandbox. PATH is
SCOPE[/SESSION]:PATH, or a path in the default scope (or --scope/--session):
a relative PATH is under /opt/workspace, an absolute one must lie under
/opt/workspace or /opt/user. A symbolic link that leads outside them, at any
depth of the path, is refused (path_escape).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError(cmd, "unknown command %q for %q (want ls, cat, put or rm)", args[0], cmd.CommandPath())
			}
			return cmd.Help()
		},
	}
	cmd.SetFlagErrorFunc(flagError)
	cmd.AddCommand(
		newFilesSub(dockerCli, "ls [-r] PATH", "List a folder (or show a file)", runFilesLs),
		newFilesSub(dockerCli, "cat PATH", "Write a file to standard output", runFilesCat),
		newFilesSub(dockerCli, "put PATH", "Write standard input to a file, atomically (parent folders are created)", runFilesPut),
		newFilesSub(dockerCli, "rm [-r] [-f] PATH", "Delete a file, a symbolic link, or with -r a folder", runFilesRm),
	)
	return cmd
}

// sandboxFiles is what the files subcommands ask of the files copier.
type sandboxFiles interface {
	List(ctx context.Context, loc files.Location, recursive bool, each func(fsproto.Entry) error) error
	Cat(ctx context.Context, loc files.Location, w io.Writer) error
	Put(ctx context.Context, loc files.Location, r io.Reader, mode string) (fsproto.PutResult, error)
	Remove(ctx context.Context, loc files.Location, recursive, force bool) (fsproto.RmResult, error)
}

// filesRun is a files subcommand: in is standard input (put's content),
// out standard output.
type filesRun func(ctx context.Context, fc sandboxFiles, in io.Reader, out io.Writer, loc files.Location, o *filesOptions) error

func newFilesSub(dockerCli command.Cli, use, short string, run filesRun) *cobra.Command {
	var o filesOptions
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError(cmd, "%q requires exactly 1 argument: PATH", cmd.CommandPath())
			}
			return fail(dockerCli.Out(), o.format, runFiles(cmd, dockerCli, args[0], &o, run))
		},
		ValidArgsFunction: completeLocations(dockerCli, 1, false),
	}
	cmd.SetFlagErrorFunc(flagError)
	f := cmd.Flags()
	f.StringVarP(&o.scope, "scope", "s", "", "Scope (default \"default\" or config default_scope); PATH is then a path, even with a \":\"")
	f.StringVar(&o.session, "session", "", "Session under the scope")
	f.StringVar(&o.format, "format", "", "Output format: json or a Go template")
	switch cmd.Name() {
	case "ls":
		f.BoolVarP(&o.recursive, "recursive", "r", false, "List everything below the folder")
	case "rm":
		f.BoolVarP(&o.recursive, "recursive", "r", false, "Delete a folder and everything in it")
		f.BoolVarP(&o.force, "force", "f", false, "A missing path is not an error")
	case "put":
		f.StringVar(&o.mode, "mode", "", "Permission bits of the file, octal (default: an existing file's, else 0644)")
	}
	return cmd
}

func runFiles(cmd *cobra.Command, dockerCli command.Cli, arg string, o *filesOptions, run filesRun) error {
	c, err := loadConfig()
	if err != nil {
		return err
	}
	loc, err := o.location(arg, c.DefaultScope, cmd.Flags().Changed("scope"), cmd.Flags().Changed("session"))
	if err != nil {
		return err
	}
	ctx, cancel := interruptible(cmd.Context())
	defer cancel()
	limits, err := copyLimits(c, nil)
	if err != nil {
		return err
	}
	if err := resolveConfigRuntime(ctx, engineAPI(dockerCli), c); err != nil {
		return err
	}
	// put and rm change the sandbox: they are audited.
	au, in := newAuditor(dockerCli, c), &audit.CountingReader{R: dockerCli.In()}
	err = run(ctx, copier(dockerCli, c, limits, false), in, dockerCli.Out(), loc, o)
	if name := cmd.Name(); name == "put" || name == "rm" {
		au.record(filesRecord("files "+name, loc, in.N, err), nil, nil)
	}
	return err
}

// location is PATH's sandbox and path: SCOPE[/SESSION]:PATH, or with
// --scope or --session (scopeSet, sessionSet) a path in that sandbox, else
// a path in the default scope.
func (o *filesOptions) location(arg, defaultScope string, scopeSet, sessionSet bool) (files.Location, error) {
	scope := defaultScope
	if scopeSet {
		scope = o.scope
	}
	return files.ParseFilesLocation(arg, core.Target{Scope: scope, Session: o.session}, scopeSet || sessionSet)
}

// filesLsJSON is the --format json schema of files ls.
type filesLsJSON struct {
	Path    string          `json:"path"`
	Entries []fsproto.Entry `json:"entries"`
}

func runFilesLs(ctx context.Context, cp sandboxFiles, in io.Reader, out io.Writer, loc files.Location, o *filesOptions) error {
	if !isDefault(o.format) {
		res := filesLsJSON{Path: loc.Path, Entries: []fsproto.Entry{}}
		if err := cp.List(ctx, loc, o.recursive, func(e fsproto.Entry) error {
			res.Entries = append(res.Entries, e)
			return nil
		}); err != nil {
			return err
		}
		return writeFormatted(out, o.format, res, nil)
	}
	// The table is written once the listing is complete: a failed call
	// prints only its error, never a header or part of a listing.
	var tab strings.Builder
	tw := tabwriter.NewWriter(&tab, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODE\tSIZE\tMODIFIED\tNAME")
	if err := cp.List(ctx, loc, o.recursive, func(e fsproto.Entry) error {
		_, err := io.WriteString(tw, filesLsLine(e))
		return err
	}); err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(out, tab.String())
	return err
}

// filesLsLine is the table line of an entry. Names, link targets and modes
// come from the sandbox: they are quoted for the terminal.
func filesLsLine(e fsproto.Entry) string {
	name := termBytes(e.Name, e.NameBytes)
	switch e.Type {
	case fsproto.TypeDir:
		name += "/"
	case fsproto.TypeSymlink:
		name += " -> " + termBytes(e.LinkTarget, e.LinkTargetBytes)
	}
	size := units.BytesSize(float64(e.Size))
	if e.Type == fsproto.TypeDir {
		size = "-"
	}
	return fmt.Sprintf("%s %s\t%s\t%s\t%s\n", typeLetter(e.Type), core.TermText(e.Mode), size, e.ModTime.Local().Format(time.DateTime), name)
}

func typeLetter(t string) string {
	switch t {
	case fsproto.TypeDir:
		return "d"
	case fsproto.TypeSymlink:
		return "l"
	case fsproto.TypeFile:
		return "-"
	case fsproto.TypeFIFO:
		return "p"
	case fsproto.TypeSocket:
		return "s"
	case fsproto.TypeCharDevice:
		return "c"
	case fsproto.TypeBlockDevice:
		return "b"
	}
	return "?"
}

func runFilesCat(ctx context.Context, cp sandboxFiles, in io.Reader, out io.Writer, loc files.Location, o *filesOptions) error {
	return cp.Cat(ctx, loc, out)
}

func runFilesPut(ctx context.Context, cp sandboxFiles, in io.Reader, out io.Writer, loc files.Location, o *filesOptions) error {
	res, err := cp.Put(ctx, loc, in, o.mode)
	if err != nil {
		return err
	}
	return writeFormatted(out, o.format, res, nil)
}

func runFilesRm(ctx context.Context, cp sandboxFiles, in io.Reader, out io.Writer, loc files.Location, o *filesOptions) error {
	res, err := cp.Remove(ctx, loc, o.recursive, o.force)
	if err != nil {
		return err
	}
	return writeFormatted(out, o.format, res, nil)
}
