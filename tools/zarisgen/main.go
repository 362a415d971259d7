// Command zarisgen writes the typed per-operation client of a partitioned Thrift service
// (gen/zarisclient for idl/zaris.thrift) from its IDL, in a package named after -out.
//
// It reads the IDL through `thrift --gen json`, checks every operation's annotations
// (zaris.kind, zaris.idempotent, zaris.routing, zaris.guards, and for a multi-key operation
// zaris.results), the class annotations on the status enum, and the shape of each request and
// response, refusing a mistake with the IDL file and line; it writes one Go file (the class
// table, the descriptors, the typed methods and the KV interface they make up) through
// go/format. The output depends only on the IDL and the flags, so running it twice gives the
// same bytes. `make generate` runs it; see README.md.
//
// Usage:
//
//	zarisgen -idl idl/zaris.thrift -out gen/zarisclient
//	zarisgen -version
package main

import (
	"errors"
	"flag"
	"fmt"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// defaultZarisImport is the import path of the thrift-generated package of idl/zaris.thrift.
const defaultZarisImport = "github.com/clustron/zaris-go/gen/zaris"

// outputFile is the name of the file zarisgen writes in the output directory, and
// serverFile the one it writes in the server output directory.
const (
	outputFile = "zarisclient.go"
	serverFile = "zarisserver.go"
)

func main() {
	err := cli(os.Args[1:], os.Stdout, os.Stderr)
	var usage usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, &usage):
		os.Exit(2) // the flag package has printed the error and the usage
	default:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// usageError is a command line the flags refuse; the flag package has printed why.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// config is one run of zarisgen, from its flags.
type config struct {
	// thrift is the Thrift compiler, idl the IDL file.
	thrift, idl string
	// out is the client's directory, serverOut the Unimplemented base's (none when empty).
	out, serverOut string
	// zarisImport is the import path of the Thrift-generated package; empty when -zaris-import
	// was not given, which means Zaris's own (defaultZarisImport) and needs Zaris's IDL.
	zarisImport string
	// goGenerate is the command of a //go:generate directive in the client; none when empty.
	goGenerate string
	// codecOut is the generated codec's directory (none when empty); the client's operations
	// then carry it (runtime.Op.Codec).
	codecOut string
}

// cli parses args as zarisgen's command line and runs it: -version prints the version to
// stdout; otherwise it generates. Flag errors and usage go to stderr.
func cli(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("zarisgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	fs.StringVar(&c.idl, "idl", "idl/zaris.thrift", "the IDL `file` to read")
	fs.StringVar(&c.out, "out", "gen/zarisclient", "the `directory` to write "+outputFile+" into")
	fs.StringVar(&c.thrift, "thrift", "thrift", "the Thrift compiler `binary` (Thrift "+thriftVersion+")")
	fs.StringVar(&c.zarisImport, "zaris-import", "", "the import `path` of the Thrift-generated Go package; needed unless the IDL is Zaris's own (namespace go zaris, "+defaultZarisImport+")")
	fs.StringVar(&c.serverOut, "server-out", "", "the `directory` to write "+serverFile+" (the Unimplemented base) into; none when empty")
	fs.StringVar(&c.goGenerate, "go-generate", "", "a `command` for a //go:generate directive in the client (run from -out's directory), for example \"make -C ../.. generate\"; none when empty")
	fs.StringVar(&c.codecOut, "codec-out", "", "the `directory` to write "+codecFile+" and "+compactFile+" (the binary and compact protocols of the IDL's types, a sibling package of the Thrift-generated one) into, and the client's operations then use it; none when empty")
	showVersion := fs.Bool("version", false, "print zarisgen's version and exit")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if *showVersion {
		_, err := fmt.Fprintf(stdout, "zarisgen %s\n", version)
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("zarisgen: unexpected argument %q: every input is a flag (zarisgen -help lists them)", fs.Arg(0))
	}
	return run(c)
}

// run generates the client for the IDL at c.idl into c.out and, when c.serverOut is not
// empty, the Unimplemented base into c.serverOut, and when c.codecOut is not empty the
// codec into it. It writes nothing unless every one rendered.
func run(c config) error {
	if strings.ContainsAny(c.goGenerate, "\r\n") {
		return fmt.Errorf("zarisgen: -go-generate %q: a directive is one line", c.goGenerate)
	}
	p, err := loadIDL(c.thrift, c.idl)
	if err != nil {
		return err
	}
	source := filepath.ToSlash(c.idl)
	zarisImport := c.zarisImport
	if zarisImport == "" {
		if err := checkZarisNamespace(p, source); err != nil {
			return err
		}
		zarisImport = defaultZarisImport
	}
	files, err := renderFiles(c, p, source, zarisImport)
	if err != nil {
		return err
	}
	return writeFiles(files)
}

// renderFiles renders the files of run c for the decoded IDL p, read from source, whose
// Thrift-generated package is zarisImport: their contents by path.
func renderFiles(c config, p *program, source, zarisImport string) (map[string][]byte, error) {
	m, err := buildModel(p, source, zarisImport)
	if err != nil {
		return nil, err
	}
	m.GoGenerate = strings.TrimSpace(c.goGenerate)
	if m.ClientPackage, err = packageName(c.out, "-out"); err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	if c.codecOut != "" {
		codec, err := renderCodecFiles(c, p, source, zarisImport)
		if err != nil {
			return nil, err
		}
		for name, src := range codec {
			files[filepath.Join(c.codecOut, name)] = src
		}
		m.CodecImport = codecImport(zarisImport, c.codecOut)
	}
	if files[filepath.Join(c.out, outputFile)], err = render(m); err != nil {
		return nil, err
	}
	if c.serverOut != "" {
		if m.ServerPackage, err = packageName(c.serverOut, "-server-out"); err != nil {
			return nil, err
		}
		if files[filepath.Join(c.serverOut, serverFile)], err = renderServer(m); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// renderCodecFiles renders the codec of p, read from source, as the package c.codecOut
// names: its files' contents by name.
func renderCodecFiles(c config, p *program, source, zarisImport string) (map[string][]byte, error) {
	pkg, err := packageName(c.codecOut, "-codec-out")
	if err != nil {
		return nil, err
	}
	cm, err := buildCodec(p, source, zarisImport, pkg)
	if err != nil {
		return nil, err
	}
	return renderCodec(cm)
}

// writeFiles writes each file's contents at its path, making the directories it needs.
func writeFiles(files map[string][]byte) error {
	for path, data := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// packageName is the Go package name of the output directory dir, which the flag named: its
// last element, which must be a Go identifier.
func packageName(dir, flag string) (string, error) {
	name := filepath.Base(filepath.Clean(dir))
	if !token.IsIdentifier(name) {
		return "", fmt.Errorf("zarisgen: %s %s: the directory's name %q is the package's name and must be a Go identifier", flag, dir, name)
	}
	return name, nil
}

// generate returns the typed client's source for the decoded IDL p, which was read from source.
func generate(p *program, source, zarisImport string) ([]byte, error) {
	m, err := buildModel(p, source, zarisImport)
	if err != nil {
		return nil, err
	}
	return render(m)
}
