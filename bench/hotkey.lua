#!/usr/bin/env sysbench
-- bench/hotkey.lua: every thread reads the same row, over and over:
--   SELECT c FROM sbtest<table> WHERE id = <id>
-- in the text protocol (one COM_QUERY per event). Used by bench/hotkey.sh;
-- on its own, after `sysbench oltp_read_write ... prepare`:
--   sysbench bench/hotkey.lua --mysql-host=127.0.0.1 --mysql-port=23498 \
--     --mysql-user=ks --mysql-password=ks --mysql-db=sbtest --threads=64 --time=10 run
-- --prefix= puts text right after SELECT (a hint such as
-- '/*+ cache(1s) */ ').

sysbench.cmdline.options = {
	id = { "id of the row every thread reads", 1 },
	table = { "number of the sbtest table read", 1 },
	prefix = { "text inserted after SELECT (e.g. a cache hint)", "" },
}

function thread_init()
	drv = sysbench.sql.driver()
	con = drv:connect()
	local prefix = sysbench.opt.prefix
	if prefix ~= "" then
		prefix = prefix .. " "
	end
	stmt = string.format("SELECT %sc FROM sbtest%d WHERE id = %d", prefix, sysbench.opt.table, sysbench.opt.id)
end

function event()
	local rs = con:query(stmt)
	if rs == nil or rs.nrows ~= 1 then
		error(string.format("%s: expected 1 row, got %s", stmt, rs and tostring(rs.nrows) or "no result set"))
	end
	rs:free()
end

function thread_done()
	con:disconnect()
end
