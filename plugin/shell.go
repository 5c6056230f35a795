package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/docker/cli/cli"
	"github.com/docker/cli/cli/command"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/moby/term"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/exec/helpercall"
)

type shellOptions struct {
	env    []string
	format string
}

// shellCommand starts bash when the image has it, else sh.
var shellCommand = []string{"/bin/sh", "-c", `if command -v bash >/dev/null 2>&1; then exec bash; fi; exec sh`}

func newShellCommand(dockerCli command.Cli) *cobra.Command {
	var o shellOptions
	cmd := &cobra.Command{
		Use:   "shell [OPTIONS] [SCOPE[/SESSION]] [-- COMMAND [ARGS...]]",
		Short: "Open an interactive shell in a sandbox (TTY), for debugging",
		Long: `Open an interactive shell (bash if the image has it, else sh) in the sandbox's
container, with a TTY, as the sandbox user 65532 in /opt/workspace: the same
hardened container that exec uses, created when it does not exist. It behaves as
docker exec -it: the terminal is raw, its size follows yours, Ctrl-C goes to the
program in the sandbox, Ctrl-D ends the shell, Ctrl-P Ctrl-Q detaches. Its exit
status is the shell's. While the shell is open the sandbox is busy: it does not
expire, and stop and rm refuse unless --force. Without SCOPE: the default scope.`,
		Example: `  docker sandbox shell u1/chatA
  docker sandbox shell u1 -- python3`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return fail(dockerCli.Out(), o.format, runShell(cmd.Context(), dockerCli, cmd, args, o))
		},
		ValidArgsFunction: completeTargets(dockerCli, 1),
	}
	cmd.SetFlagErrorFunc(flagError)
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().StringArrayVarP(&o.env, "env", "e", nil, "Set an environment variable (KEY=VALUE)")
	cmd.Flags().StringVar(&o.format, "format", "", "json: a failure to open the shell is also one JSON error object on stdout")
	return cmd
}

func runShell(ctx context.Context, dockerCli command.Cli, cmd *cobra.Command, args []string, o shellOptions) (err error) {
	positional, command := args, shellCommand
	dash := cmd.ArgsLenAtDash()
	if dash < 0 && len(args) >= 2 && args[1] == "--" {
		// Flags stop at SCOPE (so that the COMMAND's own flags stay its
		// own), which leaves the -- among the arguments.
		args = append(args[:1:1], args[2:]...)
		dash = 1
	}
	if dash >= 0 {
		positional, command = args[:dash], args[dash:]
		if len(command) == 0 {
			return usageError(cmd, "give a COMMAND after --, or leave out the --")
		}
	}
	if len(positional) > 1 {
		return usageError(cmd, "%q takes at most one SCOPE[/SESSION] (then -- COMMAND)", cmd.CommandPath())
	}
	c, err := loadConfig()
	if err != nil {
		return err
	}
	target := core.Target{Scope: c.DefaultScope}
	if len(positional) == 1 {
		if target, err = core.ParseTarget(positional[0]); err != nil {
			return err
		}
	}
	if err := checkNetwork(ctx, engineAPI(dockerCli), c.Network, c.Source("network")); err != nil {
		return err
	}
	if !dockerCli.In().IsTerminal() {
		return core.Errorf(core.CodeBadFlag, "the input device is not a TTY: docker sandbox shell needs a terminal (for scripts, use docker sandbox exec)")
	}
	if err := resolveConfigRuntime(ctx, engineAPI(dockerCli), c); err != nil {
		return err
	}
	spec := sandboxSpec(c, builder(dockerCli, c), target)
	m := manager(dockerCli, c)
	m.MaxSandboxes = c.MaxSandboxes
	if c.Network != "none" {
		// A sandbox with egress is set up by exec; shell only joins it.
		if _, err := engineAPI(dockerCli).ContainerInspect(ctx, target.ContainerName()); err != nil {
			return core.Errorf(core.CodeBadFlag, "sandbox %s does not run and the configured network is %q: create it with `docker sandbox exec -s %s ...` first, then open the shell", target, c.Network, target.Scope)
		}
	}
	env := append([]string(nil), o.env...)
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return core.Errorf(core.CodeBadFlag, "invalid --env %q: want KEY=VALUE", kv)
		}
	}
	au := newAuditor(dockerCli, c)
	defer func() { au.record(shellRecord(target, command, dash >= 0, env, err), nil, nil) }()
	// The container can expire between Ensure and the exec (an idle TTL
	// running out that very moment): try again, the shell has not started.
	for attempt := 0; ; attempt++ {
		id, _, err := m.Ensure(ctx, spec)
		if err != nil {
			return err
		}
		code, started, err := lcShellExec(ctx, dockerCli, id, shellWrapped(command), env, sandboxIdleTTL(ctx, engineAPI(dockerCli), id))
		switch {
		case err == nil && code == 0:
			return nil
		case err == nil:
			return cli.StatusError{StatusCode: code} // the shell's own exit status
		case !started && sbexec.IsGoneError(err) && attempt < 3:
			continue
		default:
			return core.EngineError(err, fmt.Sprintf("shell in sandbox %s", target))
		}
	}
}

// lcShellDetachKeys end the attachment and leave the shell running, as with
// docker exec -it.
const lcShellDetachKeys = "ctrl-p,ctrl-q"

// shellWrapped is command under the helper's shell wrapper (exec/inside
// shell.go): the engine exec's process is the helper, never the image's
// shell or what it reads at start (~/.bashrc, /etc/bash.bashrc), which are
// sandboxed code and must not run as an exec root: PID 1 would serve it,
// and it could keep the sandbox alive after the shell was closed.
func shellWrapped(command []string) []string {
	return append([]string{core.HelperPath, "shell", "--"}, command...)
}

// sandboxIdleTTL is the idle TTL the sandbox's PID 1 runs with (its
// container's label), which can differ from this call's configuration: a
// shell joins a sandbox whatever its TTL. Unknown: 1 s, the shortest, so
// that the shell's lease never lapses while it is attached.
func sandboxIdleTTL(ctx context.Context, api interface {
	ContainerInspect(ctx context.Context, container string) (container.InspectResponse, error)
}, id string) time.Duration {
	c, err := api.ContainerInspect(ctx, id)
	if err != nil || c.Config == nil {
		return time.Second
	}
	ttl, err := time.ParseDuration(c.Config.Labels[core.LabelIdleTTL])
	if err != nil || ttl < 0 {
		return time.Second
	}
	return ttl
}

// shellTouchEvery is how often the client renews its shell's lease
// (`sandbox-helper touch`) in a sandbox whose idle TTL is ttl: three times
// per TTL, between once a second and once a minute; never for no TTL. PID 1
// grants a lease of its TTL, 5 s at least.
func shellTouchEvery(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		return 0
	}
	return min(max(ttl/3, time.Second), time.Minute)
}

// lcShellExec runs command with a TTY in the container (by ID), the terminal raw, its
// size following the client's, and returns its exit code. It is docker exec
// -it (docker/cli's container/exec.go and hijack.go), rebuilt on the exported
// streams and moby/term helpers: the docker/cli container command package
// itself would pull in modules this project does not carry. While the
// terminal is attached it renews the shell's lease (shellTouchEvery of
// idleTTL): a shell whose client is gone keeps the sandbox no longer than
// its idle TTL.
func lcShellExec(ctx context.Context, dockerCli command.Cli, id string, command, env []string, idleTTL time.Duration) (code int, started bool, err error) {
	api := engineAPI(dockerCli)
	h, w := dockerCli.Out().GetTtySize()
	r, err := helpercall.Do(ctx, api, helpercall.Call{Container: id,
		Exec: container.ExecOptions{
			User: core.SandboxUser, Tty: true, AttachStdin: true, AttachStdout: true, AttachStderr: true,
			Env: env, WorkingDir: core.WorkspaceDir, Cmd: command, ConsoleSize: &[2]uint{h, w},
		},
		Attach: container.ExecAttachOptions{Tty: true, ConsoleSize: &[2]uint{h, w}},
		Session: func(execID string, hj types.HijackedResponse) error {
			if every := shellTouchEvery(idleTTL); every > 0 {
				tctx, stop := context.WithCancel(ctx)
				defer stop()
				go touchShells(tctx, api, id, every)
			}
			return lcShellSession(ctx, dockerCli, execID, hj)
		},
		Inspect: true,
	})
	step, err := helpercall.Split(err)
	switch {
	case step == helpercall.Create || step == helpercall.Attach:
		return 0, false, err
	case errors.Is(err, errShellDetached):
		return 0, true, nil
	case err != nil:
		return 0, true, err
	case r.Running:
		// The stream ended but the shell did not (the connection broke).
		return 0, true, core.Errorf(core.CodeSandboxGone, "lost the shell's stream")
	}
	return r.ExitCode, true, nil
}

// touchEngine is what touchShells asks the engine.
type touchEngine interface {
	ContainerExecCreate(ctx context.Context, container string, options container.ExecOptions) (container.ExecCreateResponse, error)
	ContainerExecStart(ctx context.Context, execID string, config container.ExecStartOptions) error
}

// touchShells renews the lease of the container's shells every period
// until ctx ends: a detached `sandbox-helper touch` (errors are ignored: a
// lease that lapses only lets the sandbox idle out).
func touchShells(ctx context.Context, api touchEngine, id string, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		resp, err := api.ContainerExecCreate(ctx, id, container.ExecOptions{User: core.SandboxUser, Cmd: []string{core.HelperPath, "touch"}})
		if err == nil {
			_ = api.ContainerExecStart(ctx, resp.ID, container.ExecStartOptions{Detach: true})
		}
	}
}

// errShellDetached: the user detached (lcShellDetachKeys); the shell runs on.
var errShellDetached = errors.New("detached")

// lcShellSession connects the terminal to the attached shell until its
// stream ends, the user detaches (errShellDetached) or ctx ends.
func lcShellSession(ctx context.Context, dockerCli command.Cli, execID string, hj types.HijackedResponse) error {
	api := engineAPI(dockerCli)
	in, out := dockerCli.In(), dockerCli.Out()
	if err := in.SetRawTerminal(); err != nil {
		return fmt.Errorf("cannot make the terminal raw: %w", err)
	}
	if err := out.SetRawTerminal(); err != nil {
		in.RestoreTerminal()
		return fmt.Errorf("cannot make the terminal raw: %w", err)
	}
	restore := sync.OnceFunc(func() {
		in.RestoreTerminal()
		out.RestoreTerminal()
	})
	defer restore()

	// The size: once now (API 1.41 ignores ConsoleSize at create; the exec
	// may need a moment to start), then on every SIGWINCH.
	resize := func() error {
		h, w := out.GetTtySize()
		if h == 0 && w == 0 {
			return nil
		}
		return api.ContainerExecResize(ctx, execID, container.ResizeOptions{Height: h, Width: w})
	}
	go func() {
		for i := 0; i < 10; i++ {
			if resize() == nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(i+1) * 10 * time.Millisecond):
			}
		}
	}()
	stopWinch := lcNotifyResize(func() { _ = resize() })
	defer stopWinch()

	keys, _ := term.ToBytes(lcShellDetachKeys)
	outputDone := make(chan error, 1)
	go func() {
		_, err := io.Copy(out, hj.Reader)
		restore()
		outputDone <- err
	}()
	detached := make(chan struct{})
	go func() {
		_, err := io.Copy(hj.Conn, term.NewEscapeProxy(in, keys))
		if _, ok := err.(term.EscapeError); ok {
			close(detached)
			return
		}
		_ = hj.CloseWrite()
	}()
	select {
	case <-outputDone:
		return nil
	case <-detached:
		restore()
		fmt.Fprintln(dockerCli.Err(), "docker sandbox: detached; the shell keeps running (and the sandbox busy) until it exits")
		return errShellDetached
	case <-ctx.Done():
		return ctx.Err()
	}
}
