package dev.ferrite.perf.bench;

import java.util.function.Consumer;

/** A {@link MetaStore} that passes every call on to another: tests override the calls they watch or bend. */
class ForwardingMetaStore implements MetaStore {
    final MetaStore inner;

    ForwardingMetaStore(MetaStore inner) {
        this.inner = inner;
    }

    @Override
    public String describe() {
        return inner.describe();
    }

    @Override
    public Session session() {
        return new ForwardingSession(inner.session());
    }

    @Override
    public void sync() {
        inner.sync();
    }

    @Override
    public String coldCache() {
        return inner.coldCache();
    }

    @Override
    public void check() {
        inner.check();
    }

    @Override
    public void close() {
        inner.close();
    }

    /** A session that passes every call on to another. */
    static class ForwardingSession implements Session {
        final Session inner;

        ForwardingSession(Session inner) {
            this.inner = inner;
        }

        @Override
        public void mkdir(String dir) {
            inner.mkdir(dir);
        }

        @Override
        public void create(String dir, String name) {
            inner.create(dir, name);
        }

        @Override
        public long list(String dir, Consumer<String> names) {
            return inner.list(dir, names);
        }

        @Override
        public long stat(String dir, String name) {
            return inner.stat(dir, name);
        }

        @Override
        public void unlink(String dir, String name) {
            inner.unlink(dir, name);
        }

        @Override
        public void rmdir(String dir) {
            inner.rmdir(dir);
        }

        @Override
        public void close() {
            inner.close();
        }
    }
}
