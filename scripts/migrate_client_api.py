#!/usr/bin/env python3
"""Rewrites C++ code written against older versions of the client API.

Two steps, run in order from where the code stands (--from):

  proto   code written when the library returned generated messages (below);
          the "values" step follows.
  values  code written against the value types before the names were made
          consistent (docs/client.md, "Moving from earlier versions"):
            MeshClient::CreateMesh / CreateDataParallelMesh /
            CreateModelParallelMesh / CreateHybridMesh / GetMesh / ListMeshes /
            DeleteMesh -> Create / CreateDataParallel / CreateModelParallel /
            CreateHybrid / Get / List / Delete (like TensorClient's);
            Delete(id, true|false) -> Delete(id, TensorsOnMesh::kDelete|kRefuse);
            ValidateBatchSize(n, false) / validate_batch_size(n, false) ->
            SuboptimalWarning::kSilent (true -> kWarn);
            PrefetchOptions::auto_release = true -> release = ReleaseMode::kOnNext;
            PrefetchStream::Next() (which only asked) -> RequestNext();
            "placement/client/placements.h" -> "placement/client/rules.h".
          Calls with a first argument `&context` / `context.get()` are raw
          gRPC stubs and are left alone.

The "proto" step:

Until the client's value types (client/include/placement/client/types.h,
tensor_info.h) replaced them, the client library returned generated
placement.v1 messages. This script does the mechanical part of moving code
over; the compiler finds the rest (see "Moving from the proto-typed API" in
docs/client.md):

  pb::DTYPE_F32 -> DType::kF32, pb::REDUCE_OP_SUM -> ReduceOp::kSum,
  pb::HARDWARE_TYPE_H100 -> HardwareType::kH100,
  pb::DATA_PARTITION_FULL -> DataPartition::kFull, pb::DType_Name -> DTypeName,
  pb::TensorInfo / ShardInfo / Mesh / Device / ... -> the client's types,
  x.id() -> x.id (fields of the value types), x.shards(i) -> x.shards[i],
  x.shards_size() -> x.shards.size(), x.has_roofline() -> x.roofline.has_value().

Accessors of the facades and handles (TensorHandle::id(), MeshRef::id(),
DeviceMeshManager::num_devices(), ...) stay calls: fix those the compiler
reports. Messages built for raw gRPC stubs must keep their accessors, so run
this only on code that uses the client library.

  python3 scripts/migrate_client_api.py [--from proto|values] [--prefix client::] FILE...

--prefix is how the file names the placement::client namespace ("" inside it,
"client::" inside placement, "pc::" with a namespace alias).
"""
import argparse
import re

DTYPES = {'F32': 'kF32', 'F64': 'kF64', 'F16': 'kF16', 'BF16': 'kBF16', 'I8': 'kI8',
          'I16': 'kI16', 'I32': 'kI32', 'I64': 'kI64', 'U8': 'kU8', 'BOOL': 'kBool',
          'UNSPECIFIED': 'kUnspecified'}
OPS = {'SUM': 'kSum', 'MEAN': 'kMean', 'MAX': 'kMax', 'MIN': 'kMin', 'PROD': 'kProd',
       'UNSPECIFIED': 'kUnspecified'}
HARDWARE = {'TPU_V5E': 'kTpuV5e', 'TPU_V5P': 'kTpuV5p', 'TPU_V4': 'kTpuV4', 'H100': 'kH100',
            'A100': 'kA100', 'V100': 'kV100', 'CPU': 'kCpu', 'UNKNOWN': 'kUnknown',
            'H200': 'kH200', 'B200': 'kB200'}
TYPES = ('DType|TensorInfo|ShardInfo|NamedTensor|DownloadHeader|Mesh|Device|ReduceOp|'
         'PrefetchStats|HardwareType')
FIELDS = ('id|name|owner|dtype|shape|placement|sharding|shards|size_bytes|device_bytes|key|'
          'tensor|total_bytes|pieces|device_id|ranges|replica_id|axes|device_ids|total_devices|'
          'tensor_count|memory_in_use_bytes|memory_limit_bytes|memory_total_bytes|num_devices|'
          'platforms|device_kinds|devices|valid|warnings|hardware_type|min_batch_size|'
          'optimal_batch_size|critical_batch_size|notes|roofline|mesh_id|spec|partial_axes|'
          'partial_op|mode|platform|device_kind|process_index|local_index|serving|version|'
          'backend|num_tensors|num_meshes|device_bytes_in_use|instance_id|listen_address|'
          'batches_staged|bytes_staged|max_batches_held|peak_flops_per_second|'
          'memory_bytes_per_second|source|max_memory_batch_size|backend_note|'
          'compute_capability|multiprocessor_count|pci_bus_id|numa_node|num_prefetch_streams')
REPEATED = ('shards|pieces|ranges|shape|axes|devices|device_ids|tensors|platforms|device_kinds|'
            'warnings|partial_axes')


def migrate(text, prefix):
    for ns in ('pb::', 'placement::v1::', 'v1::'):
        e = re.escape(ns)
        text = re.sub(e + r'DTYPE_([A-Z0-9]+)\b', lambda m: prefix + 'DType::' + DTYPES[m[1]], text)
        text = re.sub(e + r'REDUCE_OP_([A-Z]+)\b', lambda m: prefix + 'ReduceOp::' + OPS[m[1]], text)
        text = re.sub(e + r'HARDWARE_TYPE_([A-Z0-9_]+)\b',
                      lambda m: prefix + 'HardwareType::' + HARDWARE[m[1]], text)
        text = text.replace(ns + 'DATA_PARTITION_REPLICATED', prefix + 'DataPartition::kReplicated')
        text = text.replace(ns + 'DATA_PARTITION_FULL', prefix + 'DataPartition::kFull')
        text = text.replace(ns + 'DType_Name(', prefix + 'DTypeName(')
        text = re.sub(e + r'(' + TYPES + r')\b(?!Service)', lambda m: prefix + m[1], text)
    text = re.sub(r'(->|\.)(' + REPEATED + r'|dims)\(([^()]+)\)', r'\1\2[\3]', text)
    text = re.sub(r'(->|\.)(' + REPEATED + r')_size\(\)', r'\1\2.size()', text)
    text = re.sub(r'(->|\.)(' + FIELDS + r')\(\)', r'\1\2', text)
    text = re.sub(r'(ranges\[[^\]]+\])\.(begin|end)\(\)', r'\1.\2', text)
    text = re.sub(r'(->|\.)has_(roofline|max_memory_batch_size)\(\)', r'\1\2.has_value()', text)
    text = re.sub(r'->message\(\)', r'->message', text)
    return text


MESH_RENAMES = {'CreateMesh': 'Create', 'CreateDataParallelMesh': 'CreateDataParallel',
                'CreateModelParallelMesh': 'CreateModelParallel', 'CreateHybridMesh': 'CreateHybrid',
                'GetMesh': 'Get', 'ListMeshes': 'List', 'DeleteMesh': 'Delete'}


def migrate_names(text, prefix):
    """The "values" step (see the module comment)."""
    def mesh_call(m):
        after = text[m.end():].lstrip()
        if after.startswith(('&', 'context', 'ctx')):  # a raw gRPC stub
            return m.group(0)
        return m.group(1) + MESH_RENAMES[m.group(2)] + '('
    text = re.sub(r'(\.\s*|->\s*)(' + '|'.join(MESH_RENAMES) + r')\(', mesh_call, text)
    delete = r'(\.\s*|->\s*)Delete\(([^,()]+(?:\([^()]*\))?),\s*(?:/\*force=\*/\s*)?'
    text = re.sub(delete + r'true\)', r'\1Delete(\2, ' + prefix + 'TensorsOnMesh::kDelete)', text)
    text = re.sub(delete + r'false\)', r'\1Delete(\2, ' + prefix + 'TensorsOnMesh::kRefuse)', text)
    for call in ('ValidateBatchSize', 'validate_batch_size'):
        for value, name in (('false', 'kSilent'), ('true', 'kWarn')):
            text = re.sub(call + r'\(([^,()]+),\s*(?:/\*warn_suboptimal=\*/\s*)?' + value + r'\b',
                          call + r'(\1, ' + prefix + 'SuboptimalWarning::' + name, text)
    text = re.sub(r'\.auto_release\s*=\s*true', '.release = ' + prefix + 'ReleaseMode::kOnNext', text)
    text = re.sub(r'\.auto_release\s*=\s*false', '.release = ' + prefix + 'ReleaseMode::kExplicit',
                  text)
    text = text.replace('"placement/client/placements.h"', '"placement/client/rules.h"')
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--prefix', default='', help='how the files name placement::client')
    parser.add_argument('--from', dest='start', choices=('proto', 'values'), default='values',
                        help='the API the code was written against')
    parser.add_argument('files', nargs='+')
    args = parser.parse_args()
    for path in args.files:
        with open(path) as f:
            old = f.read()
        new = migrate(old, args.prefix) if args.start == 'proto' else old
        new = migrate_names(new, args.prefix)
        if new != old:
            with open(path, 'w') as f:
                f.write(new)
            print(f'rewrote {path}')


if __name__ == '__main__':
    main()
