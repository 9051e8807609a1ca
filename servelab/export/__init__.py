"""Results that other tools read, and other tools' runs read in: each measured point as an
llm-d benchmark report validated against its schema (llmd, llmd_schema, llmd_export; its
latencies over the point's requests, pooled; its names where llm-d's tools look,
llmd_layout; written only where nothing else would be lost, export_folder), and `vllm bench
serve`, AIPerf or llm-d results as rows of a servelab table (importers, llmd_import,
import_table). Made from the tables and the store, with no engine running; the paper archive
carries the reports."""
MAY_IMPORT = ("config", "engines", "serve", "search", "analysis")
