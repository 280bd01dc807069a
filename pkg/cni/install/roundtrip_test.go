package install

import (
	"bytes"
	"encoding/json"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// roundtripCases are the node configurations under testdata/roundtrip:
// unusual key order, tabs, CRLF, no trailing newline, an empty list,
// escapes, a .conf, and a stale copy of our entry.
func roundtripCases(t *testing.T) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("testdata", "roundtrip", "*.conf*"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no round-trip cases: %v", err)
	}
	var out []string
	for _, n := range names {
		if !strings.HasSuffix(n, ".golden") {
			out = append(out, n)
		}
	}
	return out
}

// golden compares got with the file name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	if *update {
		must(t, os.WriteFile(name, got, 0o644))
		return
	}
	want, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (-update rewrites it)\n got:\n%s\nwant:\n%s", name, got, want)
	}
}

// removedWant is what uninstalling must leave: the input itself, or for an
// input that already held our entry, its .removed.golden.
func removedWant(t *testing.T, in string, data []byte, removed []byte) []byte {
	t.Helper()
	if !bytes.Contains(data, []byte(`"istio-cni"`)) {
		return data
	}
	golden(t, in+".removed.golden", removed)
	want, _ := os.ReadFile(in + ".removed.golden")
	return want
}

// TestInsertRemoveRoundTrip: Insert's output is the golden, Remove gives
// back the conflist byte for byte, and Insert twice is Insert once.
func TestInsertRemoveRoundTrip(t *testing.T) {
	for _, in := range roundtripCases(t) {
		t.Run(filepath.Base(in), func(t *testing.T) {
			data, err := os.ReadFile(in)
			must(t, err)
			out, err := Insert(data, entry())
			must(t, err)
			golden(t, in+".installed.golden", out)
			if r := Check(out, entry()); r != "" {
				t.Errorf("after Insert: %s", r)
			}
			again, err := Insert(out, entry())
			if err != nil || !bytes.Equal(again, out) {
				t.Errorf("Insert twice changed the file (err %v):\n%s", err, again)
			}
			removed, had, err := Remove(out)
			if err != nil || !had {
				t.Fatalf("Remove: had=%v err=%v", had, err)
			}
			if strings.HasSuffix(in, ".conf") {
				return // a .conf comes back through the installer's record (TestInstallerRoundTrip)
			}
			if want := removedWant(t, in, data, removed); !bytes.Equal(removed, want) {
				t.Errorf("Remove(Insert(x)) is not x\n got:\n%q\nwant:\n%q", removed, want)
			}
		})
	}
}

// snapshot is every file of a directory with its bytes and mode.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	must(t, err)
	m := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		must(t, err)
		info, err := e.Info()
		must(t, err)
		m[e.Name()] = info.Mode().String() + " " + string(b)
	}
	return m
}

// TestInstallerRoundTrip runs the installer on a node whose net dir holds
// each case (a .conf with mode 0600 among them) and stops it: the net dir
// is then exactly as before, names, modes and bytes.
func TestInstallerRoundTrip(t *testing.T) {
	for _, in := range roundtripCases(t) {
		t.Run(filepath.Base(in), func(t *testing.T) {
			data, err := os.ReadFile(in)
			must(t, err)
			tr := newTree(t)
			for _, f := range []string{"10-bridge.conf", "99-other.conflist"} {
				must(t, os.Remove(filepath.Join(tr.cfg.NetDir, f)))
			}
			name := filepath.Join(tr.cfg.NetDir, filepath.Base(in))
			must(t, os.WriteFile(name, data, 0o600))
			before := snapshot(t, tr.cfg.NetDir)
			tr.conf = ConflistPath(name)
			_, stop := tr.start(t)
			if b, _ := os.ReadFile(tr.conf); !bytes.Equal(b, mustRead(t, in+".installed.golden")) {
				t.Errorf("installed file is not the golden:\n%s", b)
			}
			stop()
			want := before
			if removed := mustRead(t, in+".removed.golden"); removed != nil {
				want = map[string]string{filepath.Base(in): "-rw------- " + string(removed)}
			}
			if got := snapshot(t, tr.cfg.NetDir); !equalMaps(got, want) {
				t.Errorf("net dir after uninstall\n got %q\nwant %q", got, want)
			}
			if _, err := os.Stat(filepath.Join(tr.cfg.AgentRunDir, originName)); !os.IsNotExist(err) {
				t.Errorf("the record of the original was left behind: %v", err)
			}
		})
	}
}

// TestRoundTripAcrossRestart: an installer that died without uninstalling
// (a crash, a node agent upgrade) leaves its record; the next one, after
// rewriting its entry, still gives back the .conf the first one found.
func TestRoundTripAcrossRestart(t *testing.T) {
	tr := newTree(t)
	conf := filepath.Join(tr.cfg.NetDir, "10-bridge.conf")
	before := snapshot(t, tr.cfg.NetDir)
	first, err := New(tr.cfg, discard())
	must(t, err)
	must(t, first.installAll())
	if _, err := os.Stat(conf); !os.IsNotExist(err) {
		t.Fatal("the .conf was not replaced")
	}
	// The next version has another entry: it rewrites the conflist.
	cfg := tr.cfg
	cfg.Entry.LogLevel = "debug"
	second, err := New(cfg, discard())
	must(t, err)
	must(t, second.installAll())
	if b, _ := os.ReadFile(tr.conf); !strings.Contains(string(b), `"debug"`) {
		t.Fatalf("second installer did not rewrite its entry:\n%s", b)
	}
	must(t, second.Uninstall())
	if got := snapshot(t, tr.cfg.NetDir); !equalMaps(got, before) {
		t.Errorf("net dir after uninstall\n got %q\nwant %q", got, before)
	}
}

// TestUninstallKeepsOthersEdits: when another component changed the
// conflist after us, uninstalling cuts only our entry and keeps their bytes.
func TestUninstallKeepsOthersEdits(t *testing.T) {
	tr := newTree(t)
	_, stop := tr.start(t)
	b, err := os.ReadFile(tr.conf)
	must(t, err)
	edited := bytes.Replace(b, []byte(`"cni0"`), []byte(`"cni1"`), 1)
	must(t, os.WriteFile(tr.conf, edited, 0o644)) // our entry intact: nothing to repair
	stop()
	got, err := os.ReadFile(tr.conf)
	must(t, err)
	want, _, err := Remove(edited)
	must(t, err)
	if !bytes.Equal(got, want) || !bytes.Contains(got, []byte(`"cni1"`)) {
		t.Errorf("after uninstall\n got:\n%s\nwant:\n%s", got, want)
	}
	if _, err := os.Stat(filepath.Join(tr.cfg.NetDir, "10-bridge.conf")); !os.IsNotExist(err) {
		t.Error("the .conf came back over someone else's edit")
	}
}

// mustRead returns a file's bytes, or nil when it does not exist.
func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if os.IsNotExist(err) {
		return nil
	}
	must(t, err)
	return b
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// FuzzInsertRemove: whatever conflist Insert accepts, its output is valid
// JSON holding our entry last, and Remove gives the input back byte for
// byte when the input had no entry of ours.
func FuzzInsertRemove(f *testing.F) {
	for _, s := range []string{
		`{"plugins":[]}`, `{"plugins":[{"type":"a"}]}`, "{\n \"plugins\": [\n  {\"type\":\"a\"}\n  ,{\"type\":\"b\"}\n ]\n}",
		`{"type":"bridge","name":"n"}`, `{"plugins":[{"type":"istio-cni"},{"type":"x"}]}`, `{"plugins":[],"plugins":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := Insert(data, entry())
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("Insert gave invalid JSON:\n%s", out)
		}
		if r := Check(out, entry()); r != "" {
			t.Fatalf("after Insert: %s\n%s", r, out)
		}
		l, err := scan(data)
		if err != nil || !l.hasPlugins || bytes.Contains(data, []byte(PluginType)) {
			return
		}
		if back, _, err := Remove(out); err != nil || !bytes.Equal(back, data) {
			t.Fatalf("Remove(Insert(x)) != x (err %v)\n x: %q\ngot: %q", err, data, back)
		}
	})
}
