package main

import (
	"bytes"
	"embed"
	"fmt"
	"go/format"
	"strings"
	"text/template"
)

//go:embed templates/*.tmpl
var templateFS embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"join":       strings.Join,
	"lowerFirst": lowerFirst,
	"codecOp": func(m *model, op opModel) codecOp {
		return codecOp{Op: op, Service: m.Service, Package: m.CodecPackage()}
	},
}).ParseFS(templateFS, "templates/*.tmpl"))

// codecOp is what the template of an operation's runtime.Codec needs.
type codecOp struct {
	Op      opModel
	Service string // the service's Go name
	Package string // the codec's package name
}

// render writes the typed client for m, formatted as gofmt would.
func render(m *model) ([]byte, error) { return renderFile(m, "client.go.tmpl", "the client") }

// renderServer writes the Unimplemented base of the service for m.
func renderServer(m *model) ([]byte, error) {
	return renderFile(m, "server.go.tmpl", "the Unimplemented base")
}

func renderFile(m *model, tmpl, what string) ([]byte, error) {
	var buf bytes.Buffer
	if err := templates.ExecuteTemplate(&buf, tmpl, m); err != nil {
		return nil, fmt.Errorf("zarisgen: rendering %s: %w", what, err)
	}
	return formatSource(buf.Bytes(), what)
}

// formatSource formats src, the rendering of what, as gofmt would.
func formatSource(src []byte, what string) ([]byte, error) {
	out, err := format.Source(src)
	if err != nil {
		return nil, fmt.Errorf("zarisgen: formatting %s: %w", what, err)
	}
	return out, nil
}

// lowerFirst lower-cases the first letter of an IDL doc sentence so it can follow a colon.
func lowerFirst(s string) string {
	if s == "" || s[0] < 'A' || s[0] > 'Z' {
		return s
	}
	return string(s[0]-'A'+'a') + s[1:]
}
