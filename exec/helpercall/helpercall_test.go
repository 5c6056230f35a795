package helpercall

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/google/go-cmp/cmp"
)

// fake is an engine whose one exec echoes its stdin on stdout and writes
// "err" on stderr, then ends with exit code 3.
type fake struct {
	createErr, attachErr, inspectErr error
	calls                            []string
	got                              container.ExecOptions
}

func (f *fake) ContainerExecCreate(_ context.Context, name string, o container.ExecOptions) (container.ExecCreateResponse, error) {
	f.calls = append(f.calls, "create "+name)
	f.got = o
	if f.createErr != nil {
		return container.ExecCreateResponse{}, f.createErr
	}
	return container.ExecCreateResponse{ID: "x1"}, nil
}

func (f *fake) ContainerExecAttach(_ context.Context, id string, _ container.ExecAttachOptions) (types.HijackedResponse, error) {
	f.calls = append(f.calls, "attach "+id)
	if f.attachErr != nil {
		return types.HijackedResponse{}, f.attachErr
	}
	client, server := net.Pipe()
	go func() {
		defer server.Close()
		in, _ := io.ReadAll(io.LimitReader(server, 5))
		_, _ = stdcopy.NewStdWriter(server, stdcopy.Stdout).Write(in)
		_, _ = stdcopy.NewStdWriter(server, stdcopy.Stderr).Write([]byte("err"))
	}()
	return types.NewHijackedResponse(client, ""), nil
}

func (f *fake) ContainerExecInspect(_ context.Context, id string) (container.ExecInspect, error) {
	f.calls = append(f.calls, "inspect "+id)
	if f.inspectErr != nil {
		return container.ExecInspect{}, f.inspectErr
	}
	return container.ExecInspect{ExitCode: 3}, nil
}

func TestDo(t *testing.T) {
	f := &fake{}
	var out, errb bytes.Buffer
	r, err := Do(context.Background(), f, Call{Container: "c", Exec: container.ExecOptions{Cmd: []string{"h", "status"}},
		Stdin: strings.NewReader("hello"), Stdout: &out, Stderr: &errb, CloseOnCancel: true, Inspect: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Result{ExecID: "x1", ExitCode: 3}, r); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	if out.String() != "hello" || errb.String() != "err" {
		t.Errorf("stdout %q, stderr %q", out.String(), errb.String())
	}
	if diff := cmp.Diff([]string{"create c", "attach x1", "inspect x1"}, f.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"h", "status"}, f.got.Cmd); diff != "" {
		t.Errorf("cmd (-want +got):\n%s", diff)
	}
}

func TestDoSteps(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name  string
		f     *fake
		c     Call
		step  Step
		calls []string
	}{
		{"create", &fake{createErr: boom}, Call{Inspect: true}, Create, []string{"create c"}},
		{"attach", &fake{attachErr: boom}, Call{Inspect: true}, Attach, []string{"create c", "attach x1"}},
		{"session", &fake{}, Call{Inspect: true, Session: func(string, types.HijackedResponse) error { return boom }}, Stream, []string{"create c", "attach x1"}},
		{"inspect", &fake{inspectErr: boom}, Call{Inspect: true, Raw: true, Stdin: strings.NewReader("hello")}, Inspect, []string{"create c", "attach x1", "inspect x1"}},
	}
	for _, tc := range cases {
		tc.c.Container = "c"
		_, err := Do(context.Background(), tc.f, tc.c)
		step, inner := Split(err)
		if step != tc.step || inner != boom || !errors.Is(err, boom) {
			t.Errorf("%s: step %v, error %v; want %v, boom", tc.name, step, err, tc.step)
		}
		if diff := cmp.Diff(tc.calls, tc.f.calls); diff != "" {
			t.Errorf("%s: calls (-want +got):\n%s", tc.name, diff)
		}
	}
	if step, err := Split(nil); step != 0 || err != nil {
		t.Errorf("Split(nil) = %v, %v", step, err)
	}
}

// MaxRead bounds what is read; the session sees the exec's ID.
func TestDoMaxReadAndSession(t *testing.T) {
	var out bytes.Buffer
	_, err := Do(context.Background(), &fake{}, Call{Container: "c", Stdin: strings.NewReader("hello"), Stdout: &out, Raw: true, MaxRead: 10})
	if err != nil || out.Len() != 10 {
		t.Errorf("read %d bytes (%v), want 10", out.Len(), err)
	}
	var id string
	_, err = Do(context.Background(), &fake{}, Call{Container: "c", Session: func(execID string, hj types.HijackedResponse) error {
		id = execID
		return hj.CloseWrite()
	}})
	if err != nil || id != "x1" {
		t.Errorf("session saw %q (%v)", id, err)
	}
}
