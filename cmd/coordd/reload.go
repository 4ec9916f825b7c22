// Reloads. SIGHUP, or a change to a file the configuration names and
// reload reads again (the TLS files and auth.api_keys_file), runs one
// reload path, daemon.reload, from one goroutine (daemon.reloads), so two
// reloads never overlap. A distroless image has no kill, and a Kubernetes
// Secret changes under a running pod; hence the file watch.
//
// The watch is on the files' directories, not on the files: a Kubernetes
// Secret or ConfigMap volume replaces its files at once by swapping a
// "..data" symlink (the files are links through it), which an inotify watch
// on a file would not see, and an editor's or a tool's write by rename
// replaces the inode a file watch holds. An event on a watched file, or on
// a name starting with ".." in its directory, starts a quiet period of
// reloadDebounce; the reload runs when no event has come for that long, so
// that a certificate and its key written one after the other are read
// together, and a burst of events is one reload. A reload that fails (a
// half-written file) keeps the running configuration, as on SIGHUP; the
// next event tries again. After every successful reload the watch follows
// the files the new configuration names.
package main

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/coordd/coordd/internal/envoyrl"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/server"
)

// reloadDebounce is how long the watched files must stay unchanged after a
// change before the reload reads them.
const reloadDebounce = 300 * time.Millisecond

// reloads runs a reload on each signal from hup and after each change to a
// watched file, until ctx ends.
func (d *daemon) reloads(ctx context.Context, args []string, hup <-chan os.Signal) {
	w := newFileWatch(d, watchedFiles(d.cfg))
	defer w.close()
	quiet := time.NewTimer(reloadDebounce)
	quiet.Stop()
	defer quiet.Stop()
	changed := map[string]bool{} // since the last reload, for its log line
	reload := func(trigger string, attrs ...any) {
		if cfg, ok := d.reload(args, append([]any{"trigger", trigger}, attrs...)...); ok {
			w.set(watchedFiles(cfg))
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			reload("SIGHUP")
		case ev, ok := <-w.events():
			if !ok {
				w.w = nil
				continue
			}
			if files := w.touched(ev); len(files) > 0 {
				for _, f := range files {
					changed[f] = true
				}
				quiet.Reset(reloadDebounce)
			}
		case err, ok := <-w.errors():
			if !ok {
				w.w = nil
				continue
			}
			// An overflow of inotify's queue loses events: reload anyway.
			d.log.Warn("watching the TLS and API key files", "err", err)
			quiet.Reset(reloadDebounce)
		case <-quiet.C:
			files := slices.Sorted(maps.Keys(changed))
			clear(changed)
			reload("file changed", "files", files)
		}
	}
}

// watchedFiles are the files of cfg that a reload reads again and that
// change under a running coordd: certificates renewed, keys rotated; and
// the directories whose every file a reload reads (ratelimit.envoy_config),
// each ending in a separator. (coordd.yaml is not among them: its changes
// need SIGHUP or a restart.)
func watchedFiles(cfg Config) []string {
	var files []string
	for _, f := range []string{cfg.TLS.CertFile, cfg.TLS.KeyFile, cfg.TLS.ClientCAFile, cfg.Auth.APIKeysFile} {
		if f != "" {
			files = append(files, filepath.Clean(f))
		}
	}
	if d := cfg.RateLimit.EnvoyConfig; d != "" {
		files = append(files, filepath.Clean(d)+string(filepath.Separator))
	}
	return files
}

// fileWatch watches the directories of a set of files. Owned by the
// reloads goroutine; its methods work on a nil watcher (none could be
// made), which watches nothing.
type fileWatch struct {
	d     *daemon
	w     *fsnotify.Watcher
	files map[string]bool
	dirs  map[string]bool
}

func newFileWatch(d *daemon, files []string) *fileWatch {
	fw := &fileWatch{d: d, files: map[string]bool{}, dirs: map[string]bool{}}
	fw.set(files)
	return fw
}

// set watches files, and no longer the directories of files it watched
// before but not now. A directory that cannot be watched is logged; its
// files reload on SIGHUP.
func (fw *fileWatch) set(files []string) {
	if fw.w == nil && len(files) > 0 {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			fw.d.log.Error("cannot watch the TLS and API key files; they reload on SIGHUP only", "err", err)
			return
		}
		fw.w = w
	}
	if fw.w == nil {
		return
	}
	want := map[string]bool{}
	fw.files = map[string]bool{}
	var trees []string // the watched directories (ending in a separator), read whole
	for _, f := range files {
		fw.files[f] = true
		want[filepath.Dir(f)] = true // a file's directory; a tree's own
		if strings.HasSuffix(f, string(filepath.Separator)) {
			trees = append(trees, filepath.Dir(f))
		}
	}
	for _, t := range trees {
		// Its parent too, to see the tree itself replaced or created;
		// and every subdirectory, which a load reads as well. A tree is
		// watched afresh at every set: a replaced directory's old watch
		// is dead.
		want[filepath.Dir(t)] = true
		_ = filepath.WalkDir(t, func(path string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				want[path] = true
				if fw.dirs[path] {
					_ = fw.w.Remove(path)
					delete(fw.dirs, path)
				}
			}
			return nil
		})
	}
	for dir := range fw.dirs {
		if !want[dir] {
			_ = fw.w.Remove(dir) // gone with its directory, perhaps
			delete(fw.dirs, dir)
		}
	}
	for dir := range want {
		if fw.dirs[dir] {
			continue
		}
		if err := fw.w.Add(dir); err != nil {
			fw.d.log.Error("cannot watch a directory; its files reload on SIGHUP only", "dir", dir, "err", err)
			continue
		}
		fw.dirs[dir] = true
	}
}

// inTree reports whether name is a watched tree (ratelimit.envoy_config)
// or lies in one.
func (fw *fileWatch) inTree(name string) bool {
	for f := range fw.files {
		if t, ok := strings.CutSuffix(f, string(filepath.Separator)); ok && (name == t || strings.HasPrefix(name, f)) {
			return true
		}
	}
	return false
}

// touched returns the watched files that ev may have changed: the file
// the event names (a watched file, a watched tree or anything in it), or
// every watched file of its directory when it names
// something starting with ".." there (the "..data" symlink, or the
// timestamped directory it points to, of a Kubernetes volume). A change of
// mode alone changes none.
func (fw *fileWatch) touched(ev fsnotify.Event) []string {
	if ev.Op == fsnotify.Chmod {
		return nil
	}
	name := filepath.Clean(ev.Name)
	dir := filepath.Dir(name)
	if fw.files[name] || fw.inTree(name) {
		return []string{name} // a watched file, a watched tree, or anything in one
	}
	if !strings.HasPrefix(filepath.Base(name), "..") || !fw.dirs[dir] {
		return nil
	}
	var files []string
	for f := range fw.files {
		if filepath.Dir(f) == dir {
			files = append(files, f)
		}
	}
	return files
}

func (fw *fileWatch) events() chan fsnotify.Event {
	if fw.w == nil {
		return nil // blocks for ever in a select
	}
	return fw.w.Events
}

func (fw *fileWatch) errors() chan error {
	if fw.w == nil {
		return nil
	}
	return fw.w.Errors
}

func (fw *fileWatch) close() {
	if fw.w != nil {
		_ = fw.w.Close()
	}
}

// reload re-reads the configuration and applies what can change while
// running: the rate-limit policies, the API keys and certificate
// identities, and the TLS files (for new connections). A configuration that
// does not load is logged at error and ignored, keeping the running one
// whole; connections stay open either way. attrs go on the log line (what
// started the reload). It returns the configuration it applied, and
// whether it applied one.
func (d *daemon) reload(args []string, attrs ...any) (Config, bool) {
	cfg, err := loadConfig(args)
	var policies map[string]limiter.Policy
	var auth server.AuthConfig
	var envoy *envoyrl.Config
	if err == nil {
		policies, err = cfg.policies()
	}
	if err == nil {
		envoy, err = cfg.envoyConfig()
	}
	if err == nil {
		err = d.services.Envoy.Check(envoy)
	}
	if err == nil {
		auth, err = cfg.Auth.config()
	}
	if err == nil && cfg.TLS.enabled() != (d.tls != nil) {
		err = errors.New("tls: turning TLS on or off needs a restart")
	}
	var next tlsFiles
	if err == nil && d.tls != nil {
		err = next.load(cfg.TLS)
	}
	if err == nil {
		// Everything is checked: apply it all.
		_ = d.limiter.SetPolicies(policies)
		_ = d.services.Envoy.SetConfig(envoy)
		d.initPolicies(policies)
		_ = d.auth.Set(auth)
		if d.tls != nil {
			d.tls.current.Store(next.current.Load())
		}
	}
	if err != nil {
		d.log.Error("reload failed; keeping the running configuration",
			append(attrs, "err", strings.ReplaceAll(err.Error(), "\n", "; "))...)
		return Config{}, false
	}
	d.log.Info("reloaded rate-limit policies, auth and TLS files", append(attrs, "policies", len(cfg.RateLimit.Policies),
		"api_keys", len(auth.APIKeys), "tls", d.tls != nil)...)
	return cfg, true
}
