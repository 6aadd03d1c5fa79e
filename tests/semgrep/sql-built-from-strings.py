import sqlite3

conn = sqlite3.connect(":memory:")


def search(term):
    # ruleid: sql-built-from-strings
    return conn.execute(f"SELECT * FROM items WHERE name LIKE '%{term}%'").fetchall()


def search_assigned(term):
    sql = f"SELECT * FROM items WHERE name = '{term}'"
    # ruleid: sql-built-from-strings
    return conn.execute(sql).fetchall()


def by_id(cur, item_id):
    # ruleid: sql-built-from-strings
    cur.execute("SELECT * FROM items WHERE id = %s" % item_id)


def by_name(cur, name):
    # ruleid: sql-built-from-strings
    cur.execute("SELECT * FROM items WHERE name = '" + name + "'")


def by_owner(cur, owner):
    query = "SELECT * FROM items WHERE owner = '{}'".format(owner)
    # ruleid: sql-built-from-strings
    cur.execute(query)


def safe(cur, name):
    # ok: sql-built-from-strings
    cur.execute("SELECT * FROM items WHERE name = ?", (name,))


def safe_assigned(cur, name):
    sql = "SELECT * FROM items WHERE name = ?"
    # ok: sql-built-from-strings
    cur.execute(sql, (name,))
