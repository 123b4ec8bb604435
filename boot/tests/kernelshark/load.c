/*
 * Loads a trace.dat as KernelShark does, through its library (libkshark 2.x): the
 * file's own buffer, then every buffer instance in it as a data stream of its own.
 * Prints, for each buffer, `buffer<TAB>NAME<TAB>ENTRIES` (the file's own buffer's
 * name empty), then one line per entry in the order KernelShark shows them:
 * `CPU<TAB>TS<TAB>SYSTEM/EVENT<TAB>TASK<TAB>INFO` (newlines in INFO as spaces).
 * Exits non-zero if the file or a buffer does not open.
 *
 * The few declarations below are libkshark.h's and libkshark-tepdata.h's; those
 * headers are not included because they need json-c's, which Debian's
 * libkshark-dev does not pull in.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

struct kshark_context;

struct kshark_entry {
	struct kshark_entry *next;
	uint16_t visible;
	int16_t stream_id;
	int16_t event_id;
	int16_t cpu;
	int32_t pid;
	int64_t offset;
	int64_t ts;
};

bool kshark_instance(struct kshark_context **kshark_ctx);
int kshark_open(struct kshark_context *kshark_ctx, const char *file);
ssize_t kshark_load_entries(struct kshark_context *kshark_ctx, int sd,
			    struct kshark_entry ***data_rows);
char *kshark_get_event_name(const struct kshark_entry *entry);
char *kshark_get_task(const struct kshark_entry *entry);
char *kshark_get_info(const struct kshark_entry *entry);
char **kshark_tep_get_buffer_names(struct kshark_context *kshark_ctx, int sd,
				   int *n_buffers);
int kshark_tep_init_all_buffers(struct kshark_context *kshark_ctx, int sd);
void kshark_free(struct kshark_context *kshark_ctx);

/* Prints `text`, `?` for none, with newlines and tabs as spaces. */
static void print_field(const char *text)
{
	if (!text) {
		fputs("?", stdout);
		return;
	}
	for (const char *c = text; *c; c++)
		putchar(*c == '\n' || *c == '\t' ? ' ' : *c);
}

/* Prints the stream `sd`'s entries under the heading of buffer `name`. */
static int print_stream(struct kshark_context *ctx, int sd, const char *name)
{
	struct kshark_entry **rows = NULL;
	ssize_t n = kshark_load_entries(ctx, sd, &rows);

	if (n < 0) {
		fprintf(stderr, "buffer '%s': its entries do not load (%zd)\n", name, n);
		return -1;
	}
	fputs("buffer\t", stdout);
	print_field(name);
	printf("\t%zd\n", n);
	for (ssize_t i = 0; i < n; i++) {
		char *event = kshark_get_event_name(rows[i]);
		char *task = kshark_get_task(rows[i]);
		char *info = kshark_get_info(rows[i]);

		printf("%d\t%lld\t", rows[i]->cpu, (long long)rows[i]->ts);
		print_field(event);
		putchar('\t');
		print_field(task);
		putchar('\t');
		print_field(info);
		putchar('\n');
		free(event);
		free(task);
		free(info);
		free(rows[i]);
	}
	free(rows);
	return 0;
}

int main(int argc, char **argv)
{
	struct kshark_context *ctx = NULL;
	char **names;
	int sd, n_buffers = 0, failed = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s TRACE.DAT\n", argv[0]);
		return 2;
	}
	if (!kshark_instance(&ctx)) {
		fprintf(stderr, "no KernelShark context\n");
		return 1;
	}
	sd = kshark_open(ctx, argv[1]);
	if (sd < 0) {
		fprintf(stderr, "%s does not open (%d)\n", argv[1], sd);
		return 1;
	}
	names = kshark_tep_get_buffer_names(ctx, sd, &n_buffers);
	if (n_buffers < 0) {
		fprintf(stderr, "the buffer names do not read (%d)\n", n_buffers);
		return 1;
	}
	/* As KernelShark opens them; their streams follow the file's own, in order. */
	if (n_buffers > 0 && kshark_tep_init_all_buffers(ctx, sd) != n_buffers) {
		fprintf(stderr, "the buffer instances do not open\n");
		return 1;
	}
	failed |= print_stream(ctx, sd, "");
	for (int b = 0; b < n_buffers; b++) {
		failed |= print_stream(ctx, sd + 1 + b, names[b]);
		free(names[b]);
	}
	free(names);
	kshark_free(ctx);
	return failed ? 1 : 0;
}
