// Command zarisgen writes the typed per-operation client of a partitioned Thrift service
// (gen/zarisclient for idl/zaris.thrift) from its IDL, in a package named after -out.
//
// It reads the IDL through `thrift --gen json`, checks every operation's annotations
// (zaris.kind, zaris.idempotent, zaris.routing, zaris.guards, and for a multi-key operation
// zaris.results), the class annotations on the status enum, and the shape of each request and
// response, refusing a mistake with the IDL file and line; it writes one Go file (the class
// table, the descriptors and the typed methods) through go/format. The output depends only on
// the IDL, so running it twice gives the same bytes. `make generate` runs it; see README.md.
//
// Usage:
//
//	zarisgen -idl idl/zaris.thrift -out gen/zarisclient
package main

import (
	"flag"
	"fmt"
	"go/token"
	"os"
	"path/filepath"
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
	idl := flag.String("idl", "idl/zaris.thrift", "the IDL `file` to read")
	out := flag.String("out", "gen/zarisclient", "the `directory` to write "+outputFile+" into")
	thriftBin := flag.String("thrift", "thrift", "the Thrift compiler `binary`")
	zarisImport := flag.String("zaris-import", defaultZarisImport, "the import `path` of the thrift-generated Go package")
	serverOut := flag.String("server-out", "", "the `directory` to write "+serverFile+" (the Unimplemented base) into; none when empty")
	flag.Parse()
	if err := run(*thriftBin, *idl, *out, *serverOut, *zarisImport); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run generates the client for the IDL at idlPath into outDir and, when serverDir is not
// empty, the Unimplemented base into serverDir. It writes nothing unless both rendered.
func run(thriftBin, idlPath, outDir, serverDir, zarisImport string) error {
	p, err := loadIDL(thriftBin, idlPath)
	if err != nil {
		return err
	}
	m, err := buildModel(p, filepath.ToSlash(idlPath), zarisImport)
	if err != nil {
		return err
	}
	if m.ClientPackage, err = packageName(outDir, "-out"); err != nil {
		return err
	}
	src, err := render(m)
	if err != nil {
		return err
	}
	files := map[string][]byte{filepath.Join(outDir, outputFile): src}
	if serverDir != "" {
		if m.ServerPackage, err = packageName(serverDir, "-server-out"); err != nil {
			return err
		}
		if files[filepath.Join(serverDir, serverFile)], err = renderServer(m); err != nil {
			return err
		}
	}
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
