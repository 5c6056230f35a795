package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/docker/cli/cli"
	"github.com/spf13/cobra"

	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

// errorObject is the JSON error schema: {"error":{"code":...,"message":...}}.
type errorObject struct {
	Error jsonError `json:"error"`
}

// jsonError is the error object's content.
type jsonError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// fail turns err into the CLI's exit status, printing the JSON error object
// on out when the command's format is json. The human message goes to stderr
// through the status error.
func fail(out io.Writer, format string, err error) error {
	if err == nil {
		return nil
	}
	var st cli.StatusError
	if errors.As(err, &st) {
		return err
	}
	if errors.Is(err, context.Canceled) {
		err = &sbexec.Error{Code: "interrupted", Message: "interrupted", Exit: 130}
	}
	e := sbexec.AsError(err)
	if isJSON(format) {
		var o errorObject
		o.Error.Code = e.Code
		o.Error.Message = e.Message
		enc := json.NewEncoder(out)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(o)
	}
	return cli.StatusError{StatusCode: e.Exit, Status: "docker sandbox: " + e.Message}
}

func flagError(cmd *cobra.Command, err error) error {
	return usageError(cmd, "%v", err)
}

// usageError is a bad invocation: exit 125, with the usage hint.
func usageError(cmd *cobra.Command, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	e := sbexec.Errorf(sbexec.CodeBadFlag, "%s\nSee '%s --help'.", msg, cmd.CommandPath())
	f, _ := cmd.Flags().GetString("format")
	return fail(cmd.OutOrStdout(), f, e)
}

func isJSON(format string) bool { return format == "json" || format == "{{json .}}" }
