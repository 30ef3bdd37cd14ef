// Command keyshard is the MySQL sharding proxy.
//
//	keyshard -config etc/ks.yaml     serve
//	keyshard -version                print the version
//	keyshard check-config FILE       validate a config file and exit
//
// SIGTERM/SIGINT drain and stop; SIGHUP reloads the config file (validated
// first: an invalid file changes nothing and is logged).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/keyshard/keyshard/proxy"
	"github.com/keyshard/keyshard/proxy/admin"
	"github.com/keyshard/keyshard/proxy/config"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"gopkg.in/natefinch/lumberjack.v2"
)

var version = "dev"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) > 0 && args[0] == "check-config" {
		if len(args) != 2 {
			fmt.Fprintln(os.Stderr, "usage: keyshard check-config FILE")
			return 2
		}
		_, warnings, err := config.Load(args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for _, w := range warnings {
			fmt.Fprintln(os.Stderr, "warning:", w)
		}
		fmt.Printf("%s: ok\n", args[1])
		return 0
	}
	fs := flag.NewFlagSet("keyshard", flag.ContinueOnError)
	cfgPath := fs.String("config", "etc/ks.yaml", "path to ks.yaml")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *showVersion {
		fmt.Println("keyshard", version)
		return 0
	}
	cfg, warnings, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	log, err := newLogger(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
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
		if err := proxy.KillAt(fp); err != nil {
			log.Error("cannot start", zap.Error(err))
			return 1
		}
		log.Warn("KS_FAILPOINT set: this process will kill itself", zap.String("failpoint", fp))
	}
	srv, err := proxy.New(cfg, log)
	if err != nil {
		log.Error("cannot start", zap.Error(err))
		return 1
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		log.Error("cannot listen", zap.String("addr", cfg.Addr), zap.Error(err))
		return 1
	}
	srv.SetAdmin(admin.SQL(srv))
	var https []*http.Server
	admin.EnableContentionProfiles()
	for _, addr := range uniq(cfg.WebAddr, cfg.PrometheusAddr) {
		h := admin.Handler(srv.Metrics().Registry, func() error { return nil })
		if addr == cfg.WebAddr {
			admin.REST(h, srv)
		}
		hs := &http.Server{Addr: addr, Handler: admin.Guard(srv.WebAllowed, h), ReadHeaderTimeout: 10 * time.Second}
		hl, err := net.Listen("tcp", addr)
		if err != nil {
			log.Error("cannot listen (admin http)", zap.String("addr", addr), zap.Error(err))
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
	log.Info("keyshard listening", zap.String("addr", cfg.Addr), zap.String("version", version),
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
				log.Info("SIGHUP: reloading the config", zap.String("source", *cfgPath))
				if warnings, err := srv.ReloadFile(false); err == nil {
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
