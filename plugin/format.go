package plugin

import (
	"encoding/json"
	"io"

	"github.com/docker/cli/templates"

	"github.com/docker-sandbox/docker-sandbox/core"
)

// writeFormatted prints v as JSON, through a Go template, or with human().
func writeFormatted(out io.Writer, format string, v any, human func() error) error {
	switch {
	case format == "" || format == "table":
		return human()
	case isJSON(format):
		enc := json.NewEncoder(out)
		enc.SetEscapeHTML(false)
		return enc.Encode(v)
	default:
		tmpl, err := templates.Parse(format)
		if err != nil {
			return core.Wrap(core.CodeBadFlag, err, "invalid --format template")
		}
		// Templates see the JSON field names, as with `docker inspect`.
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var generic any
		_ = json.Unmarshal(b, &generic)
		if err := tmpl.Execute(out, generic); err != nil {
			return core.Wrap(core.CodeBadFlag, err, "executing the --format template")
		}
		_, err = io.WriteString(out, "\n")
		return err
	}
}
