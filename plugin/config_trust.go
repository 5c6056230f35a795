package plugin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/docker/cli/cli/command"
	cliconfig "github.com/docker/cli/cli/config"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/plugin/config"
)

type configTrustOptions struct {
	format string
	list   bool
	revoke bool
}

// trustJSON is the `config trust --format json` schema (trust and revoke).
type trustJSON struct {
	File   string `json:"file"`   // the trust key: folder with links resolved, and the name
	SHA256 string `json:"sha256"` // of the content trusted; "" for revoke
	// Trusted: the file is now trusted (trust) or still trusted (revoke:
	// false).
	Trusted bool `json:"trusted"`
	// Revoked: a record was removed (revoke only).
	Revoked bool `json:"revoked"`
	// Keys are the keys the file sets, which now apply in full.
	Keys []string `json:"keys"`
}

// trustListJSON is the `config trust --list --format json` schema.
type trustListJSON struct {
	Files []trustListEntry `json:"files"`
}

type trustListEntry struct {
	File      string    `json:"file"`
	SHA256    string    `json:"sha256"`
	TrustedAt time.Time `json:"trusted_at"`
	// State is trusted (the content still matches), changed (edited since:
	// untrusted until trusted again) or missing.
	State string `json:"state"`
}

func newConfigTrustCommand(dockerCli command.Cli) *cobra.Command {
	var o configTrustOptions
	cmd := &cobra.Command{
		Use:   "trust [OPTIONS] [FILE]",
		Short: "Trust a project file (.docker-sandbox.toml) by path and content, so that all of its values apply",
		Long: `Trust a project file by its path and the SHA-256 of its content. Until then a
project file may only narrow the user file and the defaults; an edited file is
untrusted again. FILE defaults to the project file found from the current
folder; a folder means its .docker-sandbox.toml. Read the file first.`,
		Example: `  docker sandbox config trust
  docker sandbox config trust ./app/.docker-sandbox.toml
  docker sandbox config trust --list
  docker sandbox config trust --revoke`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError(cmd, "%q takes at most one FILE", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return fail(dockerCli.Out(), o.format, runConfigTrust(dockerCli, args, o))
		},
	}
	cmd.SetFlagErrorFunc(flagError)
	f := cmd.Flags()
	f.StringVar(&o.format, "format", "", "Output format: json or a Go template")
	f.BoolVar(&o.list, "list", false, "List the trusted files and whether each still matches")
	f.BoolVar(&o.revoke, "revoke", false, "Forget the trust of FILE (default: the project file found from here)")
	return cmd
}

func runConfigTrust(dockerCli command.Cli, args []string, o configTrustOptions) error {
	trustFile := config.TrustFilePath(cliconfig.Dir())
	recs, err := config.LoadTrust(trustFile)
	if err != nil {
		return core.Wrap(core.CodeBadConfig, err, "config: trust file")
	}
	out := dockerCli.Out()
	if o.list {
		if o.revoke || len(args) > 0 {
			return core.Errorf(core.CodeBadFlag, "--list takes no FILE and no --revoke")
		}
		return listTrust(dockerCli, recs, o.format)
	}
	file, err := trustTarget(args)
	if err != nil {
		return err
	}
	key, err := config.TrustKey(file)
	if err != nil {
		if !o.revoke {
			return core.Errorf(core.CodeFileNotFound, "cannot trust %s: %v", core.TermText(file), err)
		}
		key, _ = filepath.Abs(file) // its folder is gone: the record has the path as it was
	}
	if o.revoke {
		n := len(recs)
		recs = slices.DeleteFunc(recs, func(r config.TrustRecord) bool { return r.Path == key })
		j := trustJSON{File: key, Revoked: len(recs) < n, Keys: []string{}}
		if j.Revoked {
			if err := config.SaveTrust(trustFile, recs); err != nil {
				return core.Wrap(core.CodeIOError, err, "cannot write %s", trustFile)
			}
		}
		return writeFormatted(out, o.format, j, func() error {
			if j.Revoked {
				fmt.Fprintf(out, "no longer trusted: %s\n", core.TermText(key))
			} else {
				fmt.Fprintf(out, "was not trusted: %s\n", core.TermText(key))
			}
			return nil
		})
	}
	data, sum, err := config.ReadProjectFile(file)
	if err != nil {
		return core.Errorf(core.CodeFileNotFound, "cannot trust %s: %v", core.TermText(file), strings.TrimPrefix(err.Error(), "stat "+file+": "))
	}
	keys, err := config.ProjectKeys(file, data)
	if err != nil {
		return asConfigError(err)
	}
	recs = slices.DeleteFunc(recs, func(r config.TrustRecord) bool { return r.Path == key })
	recs = append(recs, config.TrustRecord{Path: key, SHA256: sum, TrustedAt: time.Now().UTC().Truncate(time.Second)})
	if err := config.SaveTrust(trustFile, recs); err != nil {
		return core.Wrap(core.CodeIOError, err, "cannot write %s", trustFile)
	}
	if keys == nil {
		keys = []string{}
	}
	j := trustJSON{File: key, SHA256: sum, Trusted: true, Keys: keys}
	return writeFormatted(out, o.format, j, func() error {
		fmt.Fprintf(out, "trusted: %s (sha256 %s)\n", core.TermText(key), sum)
		if len(keys) > 0 {
			fmt.Fprintf(out, "its values now apply in full: %s\n", strings.Join(keys, ", "))
		}
		fmt.Fprintln(out, "an edit makes it untrusted again")
		return nil
	})
}

// trustTarget is FILE: a project file, or a folder holding one; without
// FILE, the project file found from the working directory.
func trustTarget(args []string) (string, error) {
	if len(args) == 0 {
		wd, err := os.Getwd()
		if err != nil {
			return "", core.Wrap(core.CodeFileNotFound, err, "cannot find the project file")
		}
		pf, err := config.FindProjectFile(wd, os.Getenv("HOME"))
		if err != nil || pf == "" {
			return "", core.Errorf(core.CodeFileNotFound, "no %s found from %s up to the repository root or $HOME: give FILE", config.ProjectFileName, core.TermText(wd))
		}
		return pf, nil
	}
	file := args[0]
	if fi, err := os.Stat(file); err == nil && fi.IsDir() {
		file = filepath.Join(file, config.ProjectFileName)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", core.Errorf(core.CodeFileNotFound, "cannot read %s: %v", core.TermText(file), err)
	}
	if filepath.Base(file) != config.ProjectFileName {
		return "", core.Errorf(core.CodeBadFlag, "%s is not a project file: only files named %s are read as project files, so trusting it would change nothing", core.TermText(file), config.ProjectFileName)
	}
	return file, nil
}

func listTrust(dockerCli command.Cli, recs []config.TrustRecord, format string) error {
	j := trustListJSON{Files: []trustListEntry{}}
	for _, r := range recs {
		e := trustListEntry{File: r.Path, SHA256: r.SHA256, TrustedAt: r.TrustedAt, State: config.TrustStateTrusted}
		if _, sum, err := config.ReadProjectFile(r.Path); err != nil {
			e.State = "missing"
		} else if sum != r.SHA256 {
			e.State = config.TrustStateChanged
		}
		j.Files = append(j.Files, e)
	}
	out := dockerCli.Out()
	return writeFormatted(out, format, j, func() error {
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "FILE\tSTATE\tTRUSTED\tSHA256")
		for _, e := range j.Files {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.12s\n", core.TermText(e.File), e.State, e.TrustedAt.Local().Format(time.DateTime), e.SHA256)
		}
		return tw.Flush()
	})
}
