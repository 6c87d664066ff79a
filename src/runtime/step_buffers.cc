// StepBuffers accessors.
#include "runtime/step_buffers.h"

#include "graph/graph.h"

namespace roofline {

const void* StepBuffers::data(int step_input) const {
  switch (static_cast<StepInput>(step_input)) {
    case StepInput::kTokenIds:
      return token_ids.data();
    case StepInput::kPositions:
      return positions.data();
    case StepInput::kSlotMapping:
      return slot_mapping.data();
    case StepInput::kBlockTables:
      return block_tables.data();
    case StepInput::kSeqLens:
      return seq_lens.data();
    case StepInput::kQueryStart:
      return query_start.data();
    case StepInput::kLastTokenIndex:
      return last_token_index.data();
  }
  return nullptr;
}

}  // namespace roofline
