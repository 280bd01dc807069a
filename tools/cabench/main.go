// Command cabench measures istiod's CA: CSRs signed per second and latency
// percentiles for ECDSA P-256 and RSA 2048 CSRs, through CreateCertificate
// over gRPC+TLS on loopback (JWT-authenticated, the CA in a child process
// so that its CPU time is measured apart from the load generator), through the in-process signing path alone, and, side by
// side, the same signing done by the openssl binary: one `openssl x509
// -req` process per CSR, and batches through `openssl ca -infiles`. Every
// path signs with the same ECDSA P-256 CA key and checks the CSR's
// signature. It prints a Markdown table on stdout; progress goes to stderr.
//
//	go run ./tools/cabench [-n 6000] [-c 2,16] [-workers 2] [-server-cpuprofile cpu.prof]
package main

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	pb "istio.io/api/security/v1alpha1"

	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
	"github.com/skiff-mesh/skiff/pkg/pki"
	"github.com/skiff-mesh/skiff/pkg/spiffe"
)

const identity = "spiffe://cluster.local/ns/default/sa/app"

type options struct {
	n, pool, opensslN, batchN, workers int
	conc                               []int
	serverProfile                      string
	// plane, when set, measures that control plane on a kube-apiserver
	// (kube.go) instead of the CA alone; istiod is Skiff's binary.
	plane, istiod string
	planeArgs     []string // extra flags for the control plane
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", 6000, "CSRs per gRPC and in-process run")
	concList := flag.String("c", "2,16", "concurrent gRPC callers: a comma-separated list, one run each")
	flag.IntVar(&o.pool, "pool", 64, "distinct CSRs per key type (made before timing, reused in turn)")
	flag.IntVar(&o.opensslN, "openssl-n", 400, "CSRs for the process-per-CSR openssl loop")
	flag.IntVar(&o.batchN, "batch-n", 4000, "CSRs for the openssl ca batch run")
	flag.IntVar(&o.workers, "workers", runtime.NumCPU(), "parallel openssl processes and in-process signers")
	flag.StringVar(&o.serverProfile, "server-cpuprofile", "", "write a CPU profile of the CA server process to this file")
	serveDir := flag.String("serve", "", "internal: run the CA server on the CA files in this directory")
	flag.StringVar(&o.plane, "control-plane", "", "skiff or istio: measure that whole control plane's CA on a local kube-apiserver, TokenReview and all (Istio's: its own pilot-discovery, built by pkg/istiobin); default: the CA alone, beside openssl")
	flag.StringVar(&o.istiod, "istiod", "bin/istiod", "with -control-plane skiff: Skiff's istiod binary")
	flag.Func("control-plane-arg", "with -control-plane: an extra flag for it (repeatable), e.g. -control-plane-arg=--kubernetesApiQPS=5000", func(v string) error {
		o.planeArgs = append(o.planeArgs, v)
		return nil
	})
	flag.Parse()
	if *serveDir != "" {
		if err := serveChild(*serveDir, o.serverProfile); err != nil {
			fmt.Fprintln(os.Stderr, "cabench server:", err)
			os.Exit(1)
		}
		return
	}
	for _, f := range strings.Split(*concList, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "cabench: -c %q: want positive integers\n", *concList)
			os.Exit(2)
		}
		o.conc = append(o.conc, n)
	}
	run := run
	if o.plane != "" {
		run = runKube
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "cabench:", err)
		os.Exit(1)
	}
}

// result is one row of the table.
type result struct {
	impl, key string
	n         int
	wall      time.Duration
	lats      []time.Duration
	cpu       time.Duration // CPU time of the measured process(es)
	clientCPU time.Duration // the load generator's, for gRPC rows
}

func (r result) row() string {
	rate := float64(r.n) / r.wall.Seconds()
	p50, p99 := "n/a", "n/a"
	if len(r.lats) > 0 {
		slices.Sort(r.lats)
		p50 = ms(r.lats[len(r.lats)/2])
		p99 = ms(r.lats[len(r.lats)*99/100])
	}
	client := "n/a"
	if r.clientCPU > 0 {
		client = fmt.Sprintf("%.0f µs", float64(r.clientCPU.Microseconds())/float64(r.n))
	}
	return fmt.Sprintf("| %s | %s | %d | %.0f | %s | %s | %.0f µs | %s |", r.impl, r.key, r.n, rate, p50, p99,
		float64(r.cpu.Microseconds())/float64(r.n), client)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

// loadAvg returns the one-minute load average, or 0 if unknown.
func loadAvg() float64 {
	var l float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscan(string(b), &l)
	}
	return l
}

func run(o options) error {
	load0 := loadAvg()
	if _, err := exec.LookPath("openssl"); err != nil {
		return fmt.Errorf("openssl binary needed: %w", err)
	}
	dir, err := os.MkdirTemp("", "cabench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	tokKey, err := pki.GenerateKey(pki.ECDSAP256)
	if err != nil {
		return err
	}
	caDir := filepath.Join(dir, "ca")
	c, err := newCA(caDir, tokKey.Public())
	if err != nil {
		return err
	}
	if err := writePublicKey(filepath.Join(dir, "token.pub"), tokKey.Public()); err != nil {
		return err
	}
	token, err := ca.SignToken(tokKey, ca.TokenClaims{Issuer: "cabench", Audiences: []string{"istio-ca"},
		Namespace: "default", ServiceAccount: "app", IssuedAt: time.Now(), Expiry: time.Now().Add(time.Hour)})
	if err != nil {
		return err
	}
	srv, err := startServer(dir, o.serverProfile)
	if err != nil {
		return err
	}
	defer srv.stop()

	var rows []result
	for _, kt := range []pki.KeyType{pki.ECDSAP256, pki.RSA2048} {
		fmt.Fprintf(os.Stderr, "making %d %v CSRs\n", o.pool, kt)
		csrs, files, err := makeCSRs(kt, o.pool, filepath.Join(dir, kt.String()))
		if err != nil {
			return err
		}
		for _, conc := range o.conc {
			fmt.Fprintf(os.Stderr, "%v: gRPC, %d callers\n", kt, conc)
			r, err := benchGRPC(srv, c.Roots(), token, csrs, o.n, conc)
			if err != nil {
				return err
			}
			r.key = kt.String()
			rows = append(rows, r)
		}
		fmt.Fprintf(os.Stderr, "%v: in-process\n", kt)
		r, err := benchSign(c, csrs, o)
		if err != nil {
			return err
		}
		r.key = kt.String()
		rows = append(rows, r)
		fmt.Fprintf(os.Stderr, "%v: openssl x509 -req per CSR\n", kt)
		r, err = benchOpensslX509(caDir, dir, files, o)
		if err != nil {
			return err
		}
		r.key = kt.String()
		rows = append(rows, r)
		fmt.Fprintf(os.Stderr, "%v: openssl ca batch\n", kt)
		r, err = benchOpensslCA(caDir, filepath.Join(dir, "db-"+kt.String()), files, o)
		if err != nil {
			return err
		}
		r.key = kt.String()
		rows = append(rows, r)
	}
	fmt.Printf("%d CPUs, load average at the start %.2f and at the end %.2f; CA key ECDSA P-256; gRPC: one TLS connection, ES256 JWT auth;\n"+
		"CPU per CSR: the CA server process only for gRPC, the whole process in-process, the openssl processes for openssl;\n"+
		"load generator CPU per CSR: the gRPC client process (sharing the same cores)\n\n",
		runtime.NumCPU(), load0, loadAvg())
	fmt.Println("| signer | CSR key | CSRs | CSRs/s | p50 | p99 | CPU per CSR | load generator CPU per CSR |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Println(r.row())
	}
	return nil
}

func newCA(caDir string, tokenKey crypto.PublicKey) (*ca.CA, error) {
	jwt, err := ca.NewJWTAuthenticator(ca.JWTConfig{Issuer: "cabench", Keys: []crypto.PublicKey{tokenKey}})
	if err != nil {
		return nil, err
	}
	return ca.New(context.Background(), ca.Config{SelfSignedDir: caDir, Authenticators: []ca.Authenticator{jwt}},
		slog.New(slog.DiscardHandler))
}

func writePublicKey(path string, pub crypto.PublicKey) error {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600)
}

// server is the CA serving CreateCertificate in a child process, so that
// its CPU time is measured apart from the load generator's.
type server struct {
	addr string
	cmd  *exec.Cmd
	stop func()
}

func startServer(dir, profile string) (*server, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-serve", dir, "-server-cpuprofile", profile)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var addr string
	if _, err := fmt.Fscanln(stdout, &addr); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("CA server did not start: %w", err)
	}
	return &server{addr: addr, cmd: cmd, stop: func() { stdin.Close(); _ = cmd.Wait() }}, nil
}

// cpu returns the server process's CPU time so far, from /proc.
func (s *server) cpu() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses: utime and
	// stime are the 12th and 13th, in clock ticks (100 a second on Linux).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	var ut, st int64
	if _, err := fmt.Sscan(f[11], &ut); err != nil {
		return 0, err
	}
	if _, err := fmt.Sscan(f[12], &st); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// serveChild runs the CA on dir's files until stdin closes, writing a CPU
// profile of its whole life to profile if set.
func serveChild(dir, profile string) error {
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	pubPEM, err := os.ReadFile(filepath.Join(dir, "token.pub"))
	if err != nil {
		return err
	}
	keys, err := ca.ParsePublicKeys(pubPEM)
	if err != nil {
		return err
	}
	c, err := newCA(filepath.Join(dir, "ca"), keys[0])
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	// The CA's service on a server set up as istiod sets up its own.
	s := istiod.NewGRPCServer(c.ServerTLSConfig(), keepalive.ServerParameters{}, nil, slog.New(slog.DiscardHandler))
	c.Register(s)
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); s.Stop() }()
	fmt.Println(l.Addr().String())
	return s.Serve(l)
}

// makeCSRs makes n CSRs for the identity and writes each to a file too.
func makeCSRs(kt pki.KeyType, n int, dir string) ([]string, []string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	u, _ := url.Parse(identity)
	var csrs, files []string
	for i := range n {
		key, err := pki.GenerateKey(kt)
		if err != nil {
			return nil, nil, err
		}
		csr, err := pki.CreateCSR(key, pki.CSROptions{URIs: []*url.URL{u}})
		if err != nil {
			return nil, nil, err
		}
		f := filepath.Join(dir, fmt.Sprintf("%d.csr", i))
		if err := os.WriteFile(f, csr, 0o600); err != nil {
			return nil, nil, err
		}
		csrs, files = append(csrs, string(csr)), append(files, f)
	}
	return csrs, files, nil
}

func cpuTime(who int) time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(who, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchGRPC(srv *server, roots *pki.Bundle, token string, csrs []string, n, conc int) (result, error) {
	conn, err := grpc.NewClient(srv.addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: roots.Pool(), ServerName: "istiod.istio-system.svc", MinVersion: tls.VersionTLS12})))
	if err != nil {
		return result{}, err
	}
	defer conn.Close()
	cl := pb.NewIstioCertificateServiceClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
	if _, err := cl.CreateCertificate(ctx, &pb.IstioCertificateRequest{Csr: csrs[0]}); err != nil {
		return result{}, fmt.Errorf("warm-up request: %w", err)
	}
	lats := make([]time.Duration, n)
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		firstErr atomic.Value
	)
	cpu0, err := srv.cpu()
	if err != nil {
		return result{}, err
	}
	client0, start := cpuTime(syscall.RUSAGE_SELF), time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t := time.Now()
				_, err := cl.CreateCertificate(ctx, &pb.IstioCertificateRequest{Csr: csrs[i%len(csrs)], ValidityDuration: 3600})
				lats[i] = time.Since(t)
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	wall, clientCPU := time.Since(start), cpuTime(syscall.RUSAGE_SELF)-client0
	cpu1, err := srv.cpu()
	if err != nil {
		return result{}, err
	}
	if err, _ := firstErr.Load().(error); err != nil {
		return result{}, err
	}
	cpu := cpu1 - cpu0
	return result{impl: fmt.Sprintf("Skiff CA, CreateCertificate over gRPC+TLS, %d callers (load generator in another process)", conc), n: n, wall: wall, lats: lats, cpu: cpu, clientCPU: clientCPU}, nil
}

func benchSign(c *ca.CA, csrs []string, o options) (result, error) {
	id, err := spiffe.Parse(identity)
	if err != nil {
		return result{}, err
	}
	lats := make([]time.Duration, o.n)
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		firstErr atomic.Value
	)
	cpu0, start := cpuTime(syscall.RUSAGE_SELF), time.Now()
	for range o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= o.n {
					return
				}
				t := time.Now()
				_, err := c.Sign([]byte(csrs[i%len(csrs)]), id, time.Hour)
				lats[i] = time.Since(t)
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	wall, cpu := time.Since(start), cpuTime(syscall.RUSAGE_SELF)-cpu0
	if err, _ := firstErr.Load().(error); err != nil {
		return result{}, err
	}
	return result{impl: fmt.Sprintf("Skiff CA, in-process Sign (%d goroutines)", o.workers), n: o.n, wall: wall, lats: lats, cpu: cpu}, nil
}

const leafExtensions = `[v3]
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
authorityKeyIdentifier=keyid
subjectAltName=critical,URI:` + identity + "\n"

// benchOpensslX509 signs each CSR with its own `openssl x509 -req`
// process (which checks the CSR's signature), workers at a time.
func benchOpensslX509(caDir, dir string, files []string, o options) (result, error) {
	ext := filepath.Join(dir, "leaf-ext.cnf")
	if err := os.WriteFile(ext, []byte(leafExtensions), 0o600); err != nil {
		return result{}, err
	}
	outDir, err := os.MkdirTemp(dir, "x509-")
	if err != nil {
		return result{}, err
	}
	lats := make([]time.Duration, o.opensslN)
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		firstErr atomic.Value
	)
	cpu0, start := cpuTime(syscall.RUSAGE_CHILDREN), time.Now()
	for range o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= o.opensslN {
					return
				}
				t := time.Now()
				out, err := exec.Command("openssl", "x509", "-req", "-in", files[i%len(files)],
					"-CA", filepath.Join(caDir, ca.CACertFile), "-CAkey", filepath.Join(caDir, ca.CAKeyFile),
					"-set_serial", fmt.Sprint(i+1), "-days", "1", "-sha256", "-extfile", ext, "-extensions", "v3",
					"-out", filepath.Join(outDir, fmt.Sprintf("%d.pem", i))).CombinedOutput()
				lats[i] = time.Since(t)
				if err != nil {
					firstErr.CompareAndSwap(nil, fmt.Errorf("openssl x509: %v: %s", err, out))
					return
				}
			}
		}()
	}
	wg.Wait()
	wall, cpu := time.Since(start), cpuTime(syscall.RUSAGE_CHILDREN)-cpu0
	if err, _ := firstErr.Load().(error); err != nil {
		return result{}, err
	}
	return result{impl: fmt.Sprintf("openssl x509 -req, one process per CSR (%d at a time)", o.workers), n: o.opensslN, wall: wall, lats: lats, cpu: cpu}, nil
}

// benchOpensslCA signs batchN CSRs with `openssl ca -batch -infiles`,
// split over workers processes with their own databases.
func benchOpensslCA(caDir, dir string, files []string, o options) (result, error) {
	per := o.batchN / o.workers
	cpu0, start := cpuTime(syscall.RUSAGE_CHILDREN), time.Now()
	errs := make([]error, o.workers)
	var wg sync.WaitGroup
	for w := range o.workers {
		db := filepath.Join(dir, fmt.Sprint(w))
		if err := os.MkdirAll(db, 0o700); err != nil {
			return result{}, err
		}
		cnf := fmt.Sprintf(`[ca]
default_ca = skiff
[skiff]
database = %[1]s/index.txt
serial = %[1]s/serial
new_certs_dir = %[1]s
certificate = %[2]s
private_key = %[3]s
default_md = sha256
default_days = 1
policy = anything
unique_subject = no
copy_extensions = none
x509_extensions = v3
[anything]
organizationName = optional
%[4]s`, db, filepath.Join(caDir, ca.CACertFile), filepath.Join(caDir, ca.CAKeyFile), leafExtensions)
		if err := errors.Join(
			os.WriteFile(filepath.Join(db, "ca.cnf"), []byte(cnf), 0o600),
			os.WriteFile(filepath.Join(db, "index.txt"), nil, 0o600),
			os.WriteFile(filepath.Join(db, "serial"), []byte(fmt.Sprintf("%04X\n", (w+1)<<20)), 0o600),
		); err != nil {
			return result{}, err
		}
		args := []string{"ca", "-batch", "-notext", "-config", filepath.Join(db, "ca.cnf"), "-out", filepath.Join(db, "out.pem"), "-infiles"}
		for i := range per {
			args = append(args, files[(w*per+i)%len(files)])
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out, err := exec.Command("openssl", args...).CombinedOutput(); err != nil {
				errs[w] = fmt.Errorf("openssl ca: %v: %s", err, tail(out))
			}
		}()
	}
	wg.Wait()
	wall, cpu := time.Since(start), cpuTime(syscall.RUSAGE_CHILDREN)-cpu0
	if err := errors.Join(errs...); err != nil {
		return result{}, err
	}
	return result{impl: fmt.Sprintf("openssl ca -batch -infiles (%d processes)", o.workers), n: per * o.workers, wall: wall, cpu: cpu}, nil
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 500 {
		s = s[len(s)-500:]
	}
	return s
}
