package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/docker/cli/cli"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
)

// errorObject is the JSON error schema: {"error":{"code":...,"message":...}}.
type errorObject struct {
	Error errorBody `json:"error"`
}

// errorBody is the one JSON form of an error, {"code":...,"message":...}:
// the content of the error object, of version's "error", of each stop/rm
// result's "error" and of exec's "error".
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// newErrorBody is err's JSON form (its stable code and its message).
func newErrorBody(err error) *errorBody {
	e := core.AsError(err)
	return &errorBody{Code: e.Code, Message: e.Message}
}

// fail turns err into the CLI's exit status, printing the JSON error object
// on out when the command's format is json. The human message goes to stderr
// through the status error, quoted when it holds control characters, bidi
// controls or invalid UTF-8: messages carry names, paths and text that came
// from a sandbox (a helper's error, a path in an archive). The JSON message
// is the message as it is.
func fail(out io.Writer, format string, err error) error {
	if err == nil {
		return nil
	}
	var st cli.StatusError
	if errors.As(err, &st) {
		return err
	}
	if errors.Is(err, context.Canceled) {
		err = &core.Error{Code: "interrupted", Message: "interrupted", Exit: 130}
	}
	e := core.AsError(err)
	if isJSON(format) {
		o := errorObject{Error: *newErrorBody(e)}
		enc := json.NewEncoder(out)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(o)
	}
	return cli.StatusError{StatusCode: e.Exit, Status: "docker sandbox: " + core.TermText(e.Message)}
}

func flagError(cmd *cobra.Command, err error) error {
	return usageError(cmd, "%v", err)
}

// usageError is a bad invocation: exit 125, with the usage hint (on a line
// of its own, after the message, quoted as fail quotes it).
func usageError(cmd *cobra.Command, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	hint := fmt.Sprintf("See '%s --help'.", cmd.CommandPath())
	e := core.Errorf(core.CodeBadFlag, "%s\n%s", msg, hint)
	f, _ := cmd.Flags().GetString("format")
	err := fail(cmd.OutOrStdout(), f, e)
	if st, ok := err.(cli.StatusError); ok {
		st.Status = "docker sandbox: " + core.TermText(msg) + "\n" + hint
		return st
	}
	return err
}
