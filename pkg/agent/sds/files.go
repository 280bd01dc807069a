package sds

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"

	"github.com/skiff-mesh/skiff/pkg/xdswire"
)

// Names of secrets read from mounted files, as Istio's agent serves them
// (DestinationRule SIMPLE/MUTUAL TLS with caCertificates, clientCertificate
// and privateKey, and Gateway servers' mounted certificates).
const (
	// FileCertPrefix names a key pair: "file-cert:CERT~KEY".
	FileCertPrefix = "file-cert:"
	// FileRootPrefix names trusted roots: "file-root:CA".
	FileRootPrefix = "file-root:"
	// SystemRoots is the operating system's trusted roots.
	SystemRoots = "file-root:system"
)

// systemRootPaths are where distributions keep the trusted roots bundle,
// in the order Istio's agent looks.
var systemRootPaths = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Gentoo, Arch
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL 6
	"/etc/ssl/ca-bundle.pem",                            // OpenSUSE
	"/etc/pki/tls/cacert.pem",                           // OpenELEC
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS, RHEL 7
	"/etc/ssl/cert.pem",                                 // Alpine
}

// fileSecret is a secret named after the files it is read from.
type fileSecret struct {
	cert, key string // a key pair
	root      string // or trusted roots
}

// parseFileSecret reads a file-cert: or file-root: name.
func parseFileSecret(name string) (fileSecret, bool, error) {
	switch {
	case name == SystemRoots:
		for _, p := range systemRootPaths {
			if _, err := os.Stat(p); err == nil {
				return fileSecret{root: p}, true, nil
			}
		}
		return fileSecret{}, true, fmt.Errorf("secret %q: no system roots bundle in %s", name, strings.Join(systemRootPaths, ", "))
	case strings.HasPrefix(name, FileCertPrefix):
		cert, key, ok := strings.Cut(strings.TrimPrefix(name, FileCertPrefix), "~")
		if !ok || cert == "" || key == "" || strings.Contains(key, "~") {
			return fileSecret{}, true, fmt.Errorf("secret %q: want file-cert:CERT~KEY", name)
		}
		return fileSecret{cert: cert, key: key}, true, nil
	case strings.HasPrefix(name, FileRootPrefix):
		root := strings.TrimPrefix(name, FileRootPrefix)
		if root == "" || strings.Contains(root, "~") {
			return fileSecret{}, true, fmt.Errorf("secret %q: want file-root:CA", name)
		}
		return fileSecret{root: root}, true, nil
	}
	return fileSecret{}, false, nil
}

// paths are the files the secret is read from.
func (f fileSecret) paths() []string {
	if f.root != "" {
		return []string{f.root}
	}
	return []string{f.cert, f.key}
}

// load reads the secret's files and returns it encoded; digest
// fingerprints their contents.
func (f fileSecret) load(name string) (sec []byte, digest []byte, err error) {
	h := sha256.New()
	read := func(p string) ([]byte, error) {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("secret %q: %w", name, err)
		}
		if len(b) == 0 {
			return nil, fmt.Errorf("secret %q: %s is empty", name, p)
		}
		h.Write(b)
		return b, nil
	}
	if f.root != "" {
		ca, err := read(f.root)
		if err != nil {
			return nil, nil, err
		}
		return xdswire.ValidationContextSecret(name, ca), h.Sum(nil), nil
	}
	cert, err := read(f.cert)
	if err != nil {
		return nil, nil, err
	}
	key, err := read(f.key)
	if err != nil {
		return nil, nil, err
	}
	return xdswire.TLSCertificateSecret(name, cert, key), h.Sum(nil), nil
}

// fileWatch tells of changes to the files of the secrets a stream asked
// for (a mounted Secret changes by swapping a symlink in its directory,
// so directories are watched).
type fileWatch struct {
	w    *fsnotify.Watcher
	dirs map[string]bool
}

func newFileWatch() (*fileWatch, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch secret files: %w", err)
	}
	return &fileWatch{w: w, dirs: map[string]bool{}}, nil
}

// watch adds the directories of paths; one that cannot be watched (not
// there yet) is returned as an error and tried again at the next call.
func (fw *fileWatch) watch(paths []string) error {
	var firstErr error
	for _, p := range paths {
		d := filepath.Dir(p)
		if fw.dirs[d] {
			continue
		}
		if err := fw.w.Add(d); err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("watch %s: %w", d, err)
			}
			continue
		}
		fw.dirs[d] = true
	}
	return firstErr
}

func (fw *fileWatch) close() { _ = fw.w.Close() }
