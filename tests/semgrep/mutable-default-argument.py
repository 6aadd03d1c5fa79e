# ruleid: mutable-default-argument
def add(item, items=[]):
    items.append(item)
    return items


# ruleid: mutable-default-argument
def tag(name, seen={}):
    seen[name] = True
    return seen


# ruleid: mutable-default-argument
def unique(x, acc=set()):
    acc.add(x)
    return acc


# ok: mutable-default-argument
def add_safe(item, items=None):
    items = [] if items is None else items
    items.append(item)
    return items


# ok: mutable-default-argument
def frozen(item, allowed=frozenset({"a", "b"})):
    return item in allowed
