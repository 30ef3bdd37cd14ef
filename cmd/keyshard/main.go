package main

import (
	_ "github.com/go-mysql-org/go-mysql/mysql"
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/pingcap/tidb/pkg/parser"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "go.uber.org/zap"
	_ "gopkg.in/natefinch/lumberjack.v2"
	_ "gopkg.in/yaml.v3"
)

func main() {}
