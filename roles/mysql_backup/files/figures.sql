-- Per-table figures of the current database, one row per base table: the table's name,
-- its row count and the sum of CRC32 over each row's columns (separated by 0x1f, with a
-- NULL map), so the order of the rows does not matter. Run in the backup's snapshot on the
-- instance and after loading the dump into a throwaway server; both sides sort the rows.
-- Identifiers are read from information_schema and quoted here (backticks doubled); the
-- statement is built by the server and run with PREPARE, never through a shell.
SET SESSION group_concat_max_len = 4294967295;
SET SESSION time_zone = '+00:00';
SET @otus_figures = (
  SELECT COALESCE(
    GROUP_CONCAT(
      CONCAT('SELECT ', QUOTE(per_table.name), ', COUNT(*), COALESCE(SUM(CRC32(CONCAT_WS(0x1f, ',
             per_table.cols, ', CONCAT(', per_table.nulls, ')))), 0) FROM `',
             REPLACE(per_table.name, '`', '``'), '`')
      ORDER BY per_table.name SEPARATOR ' UNION ALL '),
    'SELECT NULL, 0, 0 FROM DUAL WHERE FALSE')
  FROM (
    SELECT c.TABLE_NAME AS name,
           GROUP_CONCAT(CONCAT('`', REPLACE(c.COLUMN_NAME, '`', '``'), '`')
                        ORDER BY c.ORDINAL_POSITION) AS cols,
           GROUP_CONCAT(CONCAT('ISNULL(`', REPLACE(c.COLUMN_NAME, '`', '``'), '`)')
                        ORDER BY c.ORDINAL_POSITION) AS nulls
    FROM information_schema.COLUMNS AS c
    JOIN information_schema.TABLES AS t
      ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME
    WHERE c.TABLE_SCHEMA = DATABASE() AND t.TABLE_TYPE = 'BASE TABLE'
    GROUP BY c.TABLE_NAME
  ) AS per_table);
PREPARE otus_figures FROM @otus_figures;
EXECUTE otus_figures;
DEALLOCATE PREPARE otus_figures;
