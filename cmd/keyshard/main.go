// Command keyshard is the MySQL sharding proxy; `keyshard help` says how
// to run it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/keyshard/keyshard/etc"
	"github.com/keyshard/keyshard/proxy"
	"github.com/keyshard/keyshard/proxy/admin"
	"github.com/keyshard/keyshard/proxy/cluster"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/control"
	"github.com/keyshard/keyshard/proxy/xa"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"gopkg.in/natefinch/lumberjack.v2"
)

var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `keyshard, a MySQL sharding proxy

Usage:
  keyshard [flags]                   serve (the default)
  keyshard check-config [-h] FILE    validate a config file; exit 0 if it is good
  keyshard config push|pull|diff     the shared config in etcd (keyshard config help)
  keyshard version                   print the version
  keyshard help [config]             this text; with config, every ks.yaml key documented

Flags (kingshard's are accepted):
  -config FILE|URL   the config file (default etc/ks.yaml), or a config shared
                     by several instances in etcd:
                     etcd://host:port[,host:port...]/prefix (etcds:// for TLS)
  -etcd-cacert, -etcd-cert, -etcd-key, -etcd-user, -etcd-password
                     etcd TLS and credentials (env KEYSHARD_ETCD_CACERT, ...)
  -log-level LEVEL   debug, info, warn or error: overrides log_level
  -addr HOST:PORT    this instance's MySQL listener, over the config's addr
                     (env KEYSHARD_ADDR): several instances can share a config
  -web-addr HOST:PORT  this instance's web listener, over web_addr
                     (env KEYSHARD_WEB_ADDR)
  -name NAME         this instance's name in logs and status (env
                     KEYSHARD_NAME; default the host name)
  -log-path DIR      this instance's log directory, over log_path
                     (env KEYSHARD_LOG_PATH)
  -version, -v       print the version and exit
  -h, -help          this text

Signals:
  SIGHUP             reload the config file or etcd document (an invalid one
                     changes nothing)
  SIGTERM, SIGINT    stop taking connections, let sessions finish their
                     statements for up to shutdown_timeout, then stop
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "check-config":
			return checkConfig(args[1:], stdout, stderr)
		case "config":
			return configCmd(args[1:], stdout, stderr)
		case "version":
			fmt.Fprintln(stdout, "keyshard", version)
			return 0
		case "help":
			if len(args) > 1 && args[1] == "config" {
				fmt.Fprint(stdout, etc.KSYAML)
				return 0
			}
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprintf(stderr, "keyshard: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	fs := flag.NewFlagSet("keyshard", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfgPath := fs.String("config", "etc/ks.yaml", "")
	logLevel := fs.String("log-level", "", "")
	var local config.Local
	fs.StringVar(&local.Addr, "addr", "", "")
	fs.StringVar(&local.WebAddr, "web-addr", "", "")
	fs.StringVar(&local.Name, "name", "", "")
	fs.StringVar(&local.LogPath, "log-path", "", "")
	etcdOpts := etcdFlags(fs)
	showVersion := fs.Bool("version", false, "")
	fs.BoolVar(showVersion, "v", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprintf(stderr, "keyshard: %v\n\n%s", err, usage)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "keyshard: unexpected %q after the flags\n\n%s", fs.Arg(0), usage)
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, "keyshard", version)
		return 0
	}
	if *logLevel != "" {
		var lvl zapcore.Level
		if err := lvl.UnmarshalText([]byte(strings.ToLower(*logLevel))); err != nil {
			fmt.Fprintf(stderr, "keyshard: -log-level %q: want debug, info, warn or error\n", *logLevel)
			return 2
		}
	}
	var (
		cfg      *config.Config
		warnings []string
		err      error
		store    *cluster.Store
		shared   cluster.State
	)
	if cluster.IsURL(*cfgPath) {
		store, shared, cfg, warnings, err = loadShared(*cfgPath, etcdOpts.FromEnv())
	} else {
		cfg, warnings, err = config.Load(*cfgPath)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if *logLevel != "" {
		cfg.LogLevel = *logLevel
	}
	local = local.FromEnv()
	local.Version = version
	if local.Name == "" {
		local.Name, _ = os.Hostname()
	}
	if err := local.Apply(cfg); err != nil {
		fmt.Fprintf(stderr, "keyshard: -addr/-web-addr (or KEYSHARD_ADDR/KEYSHARD_WEB_ADDR): %v\n", err)
		return 2
	}
	log, err := newLogger(cfg)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer func() { _ = log.Sync() }()
	for _, w := range warnings {
		log.Warn("config: " + w)
	}
	runtime.GOMAXPROCS(cfg.Procs(os.Getenv("GOMAXPROCS"), runtime.GOMAXPROCS(0)))
	if fp := os.Getenv("KS_FAILPOINT"); fp != "" {
		// Fault tests only: the process kills itself at a step of a write
		// over several nodes.
		if err := xa.KillAt(fp); err != nil {
			log.Error("cannot start", zap.Error(err))
			return 1
		}
		log.Warn("KS_FAILPOINT set: this process will kill itself", zap.String("failpoint", fp))
	}
	// The listener first: an instance that holds its address may take
	// over its own earlier life's entry in the member list.
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		log.Error("cannot listen", zap.String("addr", cfg.Addr), zap.Error(err))
		return 1
	}
	var srv *proxy.Server
	if store != nil {
		srv, err = proxy.NewClustered(cfg, log, control.ClusterOptions{Store: store, State: shared, Local: local, Version: version})
	} else {
		srv, err = proxy.New(cfg, log, local)
	}
	if err != nil {
		ln.Close()
		log.Error("cannot start", zap.Error(err))
		return 1
	}
	srv.SetAdmin(admin.SQL(srv))
	var https []*http.Server
	admin.EnableContentionProfiles()
	for _, addr := range uniq(cfg.WebAddr, cfg.PrometheusAddr) {
		h := admin.Handler(srv, func() error { return nil })
		if addr == cfg.WebAddr {
			admin.REST(h, srv)
		}
		hs := &http.Server{Addr: addr, Handler: admin.Guard(srv.WebAllowed, h), ReadHeaderTimeout: 10 * time.Second}
		hl, err := net.Listen("tcp", addr)
		if err != nil {
			log.Error("cannot listen (admin http)", zap.String("addr", addr), zap.Error(err))
			_ = srv.Shutdown(context.Background())
			return 1
		}
		https = append(https, hs)
		go func() {
			if err := hs.Serve(hl); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("admin http", zap.Error(err))
			}
		}()
		log.Info("admin http listening", zap.String("addr", addr))
	}
	log.Info("keyshard listening", zap.String("addr", cfg.Addr), zap.String("name", local.Name), zap.String("version", version),
		zap.Int("procs", runtime.GOMAXPROCS(0)))

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	for {
		select {
		case err := <-errc:
			log.Error("serve", zap.Error(err))
			return 1
		case sig := <-sigc:
			if sig == syscall.SIGHUP {
				log.Info("SIGHUP: reloading the config", zap.String("source", cfg.Source()))
				if warnings, err := srv.Control().ReloadFile(false); err == nil {
					for _, w := range warnings {
						log.Warn("config: " + w)
					}
				}
				continue
			}
			log.Info("shutting down", zap.String("signal", sig.String()))
			ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout.D())
			err := srv.Shutdown(ctx)
			cancel()
			for _, hs := range https {
				_ = hs.Close()
			}
			if err != nil {
				log.Warn("shutdown timed out; sessions were interrupted", zap.Error(err))
			}
			log.Info("stopped")
			return 0
		}
	}
}

// checkConfig is `keyshard check-config [-h] FILE`.
func checkConfig(args []string, stdout, stderr io.Writer) int {
	const use = "usage: keyshard check-config FILE\n\nValidates FILE as keyshard would load it: prints \"FILE: ok\" and\nits warnings, or its problems (with line numbers) and exits 1.\n"
	if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprint(stdout, use)
		return 0
	}
	if len(args) != 1 || strings.HasPrefix(args[0], "-") {
		fmt.Fprint(stderr, use)
		return 2
	}
	_, warnings, err := config.Load(args[0])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	for _, w := range warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	fmt.Fprintf(stdout, "%s: ok\n", args[0])
	return 0
}

func uniq(addrs ...string) []string {
	var out []string
	seen := map[string]bool{}
	for _, a := range addrs {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

// newLogger builds the system logger: stderr, or log_path/keyshard.log
// rotated by lumberjack.
func newLogger(cfg *config.Config) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(strings.ToLower(cfg.LogLevel))); err != nil {
		lvl = zapcore.InfoLevel
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	var w zapcore.WriteSyncer = zapcore.Lock(os.Stderr)
	if cfg.LogPath != "" {
		if err := os.MkdirAll(cfg.LogPath, 0o755); err != nil {
			return nil, err
		}
		compress := cfg.LogCompress == nil || *cfg.LogCompress
		w = zapcore.AddSync(&lumberjack.Logger{
			Filename: filepath.Join(cfg.LogPath, "keyshard.log"), MaxSize: max(cfg.LogMaxSizeMB, 1),
			MaxBackups: cfg.LogMaxBackups, MaxAge: cfg.LogMaxAgeDays, Compress: compress,
		})
	}
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), w, lvl)
	return zap.New(core), nil
}
