package main

import (
	"fmt"
	"time"

	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// ormItem is the GORM model of orm_items, which keyshard shards for user
// orm (4 sub-tables) and which is a plain table directly.
type ormItem struct {
	ID        int64   `gorm:"primaryKey;autoIncrement:false"`
	Name      string  `gorm:"size:64;index"`
	Price     float64 `gorm:"type:decimal(10,2)"`
	Sku       *string `gorm:"size:16;uniqueIndex"`
	CreatedAt time.Time
}

func (ormItem) TableName() string { return "orm_items" }

// gormCase runs GORM as its users do, with the driver's defaults
// (prepared statements, no interpolation): AutoMigrate twice (the second
// must find the table as the model says and change nothing), the
// migrator's view of the table, and CRUD.
func gormCase() any {
	dsn := fmt.Sprintf("orm:orm@tcp(%s)/ks_compat?parseTime=true&timeout=10s&readTimeout=20s", addr)
	db, err := gorm.Open(gormmysql.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return errResult(err)
	}
	sqlDB, _ := db.DB()
	defer sqlDB.Close()
	out := obj{}
	m := db.Migrator()
	out["drop"] = errOrOK(m.DropTable(&ormItem{}))
	out["migrate"] = errOrOK(db.AutoMigrate(&ormItem{}))
	out["migrate_again"] = errOrOK(db.AutoMigrate(&ormItem{}))
	out["has_table"] = m.HasTable(&ormItem{})
	out["has_index"] = m.HasIndex(&ormItem{}, "idx_orm_items_name")
	out["has_column"] = m.HasColumn(&ormItem{}, "Sku")
	if cols, err := m.ColumnTypes(&ormItem{}); err != nil {
		out["columns"] = errResult(err)
	} else {
		var cs [][]any
		for _, c := range cols {
			nullable, _ := c.Nullable()
			pk, _ := c.PrimaryKey()
			uniq, _ := c.Unique()
			ln, _ := c.Length()
			ct, _ := c.ColumnType()
			cs = append(cs, []any{c.Name(), c.DatabaseTypeName(), ct, nullable, pk, uniq, ln})
		}
		out["columns"] = cs
	}
	if idx, err := m.GetIndexes(&ormItem{}); err != nil {
		out["indexes"] = errResult(err)
	} else {
		var is [][]any
		for _, i := range idx {
			u, _ := i.Unique()
			pk, _ := i.PrimaryKey()
			is = append(is, []any{i.Name(), i.Columns(), u, pk})
		}
		out["indexes"] = is
	}
	at := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	var items []ormItem
	for i := int64(1); i <= 8; i++ {
		sku := fmt.Sprintf("s%d", i)
		items = append(items, ormItem{ID: i, Name: fmt.Sprintf("n%d", i%3), Price: float64(i) * 1.5, Sku: &sku, CreatedAt: at})
	}
	res := db.Create(&items)
	out["create"] = obj{"err": errOrOK(res.Error), "rows": res.RowsAffected}
	var one ormItem
	out["first"] = errOrOK(db.First(&one, 5).Error)
	out["first_row"] = []any{one.ID, one.Name, one.Price}
	res = db.Model(&ormItem{}).Where("id = ?", 5).Update("price", 99)
	out["update"] = obj{"err": errOrOK(res.Error), "rows": res.RowsAffected}
	res = db.Delete(&ormItem{}, 2)
	out["delete"] = obj{"err": errOrOK(res.Error), "rows": res.RowsAffected}
	var n int64
	out["count"] = obj{"err": errOrOK(db.Model(&ormItem{}).Where("name = ?", "n1").Count(&n).Error), "n": n}
	var all []ormItem
	out["find"] = errOrOK(db.Order("id").Find(&all).Error)
	var rows [][]any
	for _, it := range all {
		rows = append(rows, []any{it.ID, it.Name, it.Price, *it.Sku, it.CreatedAt.UTC().Format(time.RFC3339)})
	}
	out["rows"] = rows
	return out
}
