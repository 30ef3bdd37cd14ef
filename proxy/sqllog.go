package proxy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/digest"
	"github.com/keyshard/keyshard/router"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"gopkg.in/natefinch/lumberjack.v2"
)

// sqlLog writes the SQL log (log_sql: on) and the slow log (slow_log_time
// ms). Both are off the request path as far as possible: entries are encoded
// into a buffered writer that a background goroutine flushes, and files are
// rotated, capped and compressed by lumberjack.
type sqlLog struct {
	all    atomic.Bool
	slowNs atomic.Int64
	sql    *zap.Logger
	slow   *zap.Logger
	syncs  []*zapcore.BufferedWriteSyncer
}

func newSQLLog(cfg *config.Config) (*sqlLog, error) {
	l := &sqlLog{}
	l.configure(cfg)
	var err error
	if l.sql, err = l.open(cfg, "sql.log"); err != nil {
		return nil, err
	}
	if l.slow, err = l.open(cfg, "slow.log"); err != nil {
		return nil, err
	}
	return l, nil
}

// configure applies log_sql and slow_log_time (at start and on reload).
func (l *sqlLog) configure(cfg *config.Config) {
	l.all.Store(strings.EqualFold(cfg.LogSQL, "on"))
	l.slowNs.Store(int64(cfg.SlowLogTime) * int64(time.Millisecond))
}

func (l *sqlLog) open(cfg *config.Config, name string) (*zap.Logger, error) {
	var w zapcore.WriteSyncer
	if cfg.LogPath == "" {
		w = zapcore.Lock(os.Stderr)
	} else {
		if err := os.MkdirAll(cfg.LogPath, 0o755); err != nil {
			return nil, err
		}
		w = zapcore.AddSync(&lumberjack.Logger{
			Filename:   filepath.Join(cfg.LogPath, name),
			MaxSize:    max(cfg.LogMaxSizeMB, 1),
			MaxBackups: cfg.LogMaxBackups,
			MaxAge:     cfg.LogMaxAgeDays,
			Compress:   boolOr(cfg.LogCompress, true),
		})
	}
	bw := &zapcore.BufferedWriteSyncer{WS: w, Size: 256 << 10, FlushInterval: time.Second}
	l.syncs = append(l.syncs, bw)
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), bw, zapcore.InfoLevel)
	return zap.New(core).Named(strings.TrimSuffix(name, ".log")), nil
}

// wants reports whether a statement that took d is logged: the SQL log is
// on or it was slow. Two atomic loads.
func (l *sqlLog) wants(d time.Duration) bool {
	slow := l.slowNs.Load()
	return slow > 0 && int64(d) >= slow || l.all.Load()
}

// record logs one statement if the SQL log is on or it was slow: one JSON
// line with who ran it, where, its digest, what it returned and where its
// time went.
func (l *sqlLog) record(s *Session, sql string, sm *digest.Sample, err error) {
	slow := l.slowNs.Load()
	isSlow := slow > 0 && int64(sm.Total) >= slow
	all := l.all.Load()
	if !isSlow && !all {
		return
	}
	id := s.digestID(sql)
	fields := make([]zap.Field, 0, 20)
	fields = append(fields,
		zap.Uint32("conn", s.c.ID()), zap.String("user", s.user), zap.String("client", s.c.Host()),
		zap.String("schema", s.vars.DB), zap.String("digest", digest.FormatID(id)), zap.Strings("nodes", s.tr.nodes),
		zap.Float64("ms", digest.Millis(sm.Total)), zap.Uint64("rows", sm.Rows), zap.Uint64("affected", sm.Affected),
		zap.Uint64("bytes", sm.Bytes))
	for i, d := range sm.Stages {
		fields = append(fields, zap.Float64(stageKeys[i], digest.Millis(d)))
	}
	fields = append(fields, zap.String("sql", router.RedactSecrets(sql))) // passwords never reach a log file
	if err != nil && !errors.Is(err, errQuit) {
		fields = append(fields, zap.String("error", toMySQL(err).Error()))
	}
	if isSlow {
		l.slow.Info("slow query", fields...)
	}
	if all {
		l.sql.Info("query", fields...)
	}
}

// stageKeys name the stages in log lines (in ms).
var stageKeys = func() (k [digest.NumStages]string) {
	for i := range k {
		k[i] = digest.Stage(i).String() + "_ms"
	}
	return k
}()

func (l *sqlLog) close() {
	for _, s := range l.syncs {
		_ = s.Stop()
	}
}
