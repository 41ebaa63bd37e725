// The libcrpm pass plugin for clang (LLVM 14, new pass manager): marks the
// blocks of checkpointed memory that the program stores into, for
// change_tracking = instrumented (docs/tracking.md).
//
//   clang -O2 -fpass-plugin=/path/to/libcrpm_instrument.so ...
//
// Every instruction that may write memory the pass cannot prove to be a
// private stack slot is followed by a mark: stores (scalar, vector, atomic,
// volatile), atomic read-modify-writes and compare-exchanges, the memset /
// memcpy / memmove intrinsics (and their element-atomic forms), masked
// stores and scatters.  The mark comes after the write, so a checkpoint that
// takes a mark always sees the write (the runtime's ordering argument,
// lib/engine/marks.h).
//
// What a mark costs:
//  - a store of at most CRPM_INSTR_MAX_STORE bytes: one load of the box word
//    (include/crpm_instrument.h), a shift, a subtract and a compare; a store
//    inside the box then tests its granule's shadow byte and sets it when
//    clear, inline (a store that may cross a granule calls crpm_instr_mark);
//  - stores into one object at constant offsets in one basic block with no
//    call between them share one mark, after the last of them;
//  - a store in a loop whose address is an affine function of the loop's
//    counter, in a loop without calls, is not marked per iteration: the range
//    the loop wrote is marked once on each exit (the loop's trip count from
//    scalar evolution; an early exit marks more than was written, never
//    less);
//  - larger writes and intrinsics call crpm_instr_mark_range, which checks
//    the box itself.
// The pass runs last in the optimisation pipeline (after vectorisation), so
// it sees the stores that remain.
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Analysis/CaptureTracking.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/Analysis/ScalarEvolutionExpressions.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/Local.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"
#include "llvm/Transforms/Utils/ScalarEvolutionExpander.h"

using namespace llvm;

namespace {

// Must match include/crpm_instrument.h.
constexpr unsigned BoxShift = 16;
constexpr uint64_t MaxStore = 64;
constexpr unsigned GranuleShift = 8;

cl::opt<bool> NoLoops("crpm-no-loop-ranges", cl::desc("libcrpm pass: mark every store, no loop ranges"),
                      cl::init(false));

// One write to mark: [Base + Lo, Base + Hi), marked after At.
struct Write {
    Instruction *At;
    Value *Base;
    int64_t Lo, Hi;
    Value *Len; // non-null: a write of Len bytes at Base (Lo = Hi = 0)
};

struct Instrumenter {
    Function &F;
    const DataLayout &DL;
    LoopInfo &LI;
    ScalarEvolution &SE;
    Module &M;
    Type *IntPtr;
    Type *I8Ptr;
    FunctionCallee Mark, MarkRange;
    GlobalVariable *Box, *Shadow;
    DenseMap<const Value *, bool> StackPrivate;

    Instrumenter(Function &F, LoopInfo &LI, ScalarEvolution &SE)
        : F(F), DL(F.getParent()->getDataLayout()), LI(LI), SE(SE), M(*F.getParent())
    {
        LLVMContext &C = M.getContext();
        IntPtr = DL.getIntPtrType(C);
        I8Ptr = Type::getInt8PtrTy(C);
        Type *Void = Type::getVoidTy(C);
        Mark = M.getOrInsertFunction("crpm_instr_mark", Void, I8Ptr, IntPtr);
        MarkRange = M.getOrInsertFunction("crpm_instr_mark_range", Void, I8Ptr, IntPtr);
        Type *I64 = Type::getInt64Ty(C);
        Box = cast<GlobalVariable>(M.getOrInsertGlobal("crpm_instr_box", I64));
        Shadow = cast<GlobalVariable>(M.getOrInsertGlobal("crpm_instr_shadow", I8Ptr));
    }

    // The object written is a stack slot whose address never escapes the
    // function: no protected array, nor the heap, can be there.
    bool stackPrivate(Value *Ptr)
    {
        const Value *U = getUnderlyingObject(Ptr, 0);
        auto *AI = dyn_cast<AllocaInst>(U);
        if (!AI)
            return false;
        auto It = StackPrivate.find(AI);
        if (It != StackPrivate.end())
            return It->second;
        bool P = !PointerMayBeCaptured(AI, /*ReturnCaptures=*/true, /*StoreCaptures=*/true);
        StackPrivate[AI] = P;
        return P;
    }

    // A call that may run code of the program (and so a checkpoint), or
    // unwind: marks pending in a block must be made before it.
    static bool barrier(const Instruction &I)
    {
        auto *CB = dyn_cast<CallBase>(&I);
        if (!CB)
            return false;
        if (auto *II = dyn_cast<IntrinsicInst>(CB)) {
            switch (II->getIntrinsicID()) {
            case Intrinsic::lifetime_start:
            case Intrinsic::lifetime_end:
            case Intrinsic::dbg_declare:
            case Intrinsic::dbg_value:
            case Intrinsic::dbg_label:
            case Intrinsic::assume:
                return false;
            default:
                return !isa<MemIntrinsic>(II) && !isa<AnyMemIntrinsic>(II) && II->mayHaveSideEffects();
            }
        }
        return true;
    }

    static bool loopHasCalls(const Loop *L)
    {
        for (BasicBlock *BB : L->blocks())
            for (Instruction &I : *BB)
                if (barrier(I))
                    return true;
        return false;
    }

    // Loop ranges: the writes of L at affine addresses, marked on its exits.
    struct LoopRanges {
        SmallVector<std::pair<const SCEV *, const SCEV *>, 4> R; // [lo, hi) as integers
    };
    DenseMap<Loop *, LoopRanges> Loops;
    DenseMap<Loop *, bool> LoopOk;

    bool loopUsable(Loop *L)
    {
        auto It = LoopOk.find(L);
        if (It != LoopOk.end())
            return It->second;
        bool Ok = !NoLoops && L->getLoopPreheader() && !loopHasCalls(L) &&
                  !isa<SCEVCouldNotCompute>(SE.getSymbolicMaxBackedgeTakenCount(L));
        LoopOk[L] = Ok;
        return Ok;
    }

    // A write of Size bytes at Ptr inside a loop: its range over the whole
    // loop when scalar evolution gives it.
    bool tryLoop(Instruction *I, Value *Ptr, uint64_t Size)
    {
        Loop *L = LI.getLoopFor(I->getParent());
        if (!L || !loopUsable(L))
            return false;
        auto *AR = dyn_cast<SCEVAddRecExpr>(SE.getSCEV(Ptr));
        if (!AR || AR->getLoop() != L || !AR->isAffine())
            return false;
        const SCEV *BTC = SE.getSymbolicMaxBackedgeTakenCount(L);
        const SCEV *First = AR->getStart(), *Last = AR->evaluateAtIteration(BTC, SE);
        if (!SE.isLoopInvariant(First, L) || !SE.isLoopInvariant(Last, L))
            return false;
        if (!First->getType()->isPointerTy() || SE.getEffectiveSCEVType(First->getType()) != IntPtr)
            return false;
        const SCEV *A = SE.getPtrToIntExpr(First, IntPtr), *B = SE.getPtrToIntExpr(Last, IntPtr);
        if (isa<SCEVCouldNotCompute>(A) || isa<SCEVCouldNotCompute>(B))
            return false;
        const SCEV *Lo = SE.getUMinExpr(A, B);
        const SCEV *Hi = SE.getAddExpr(SE.getUMaxExpr(A, B), SE.getConstant(IntPtr, Size));
        Instruction *PH = L->getLoopPreheader()->getTerminator();
        if (!isSafeToExpandAt(Lo, PH, SE) || !isSafeToExpandAt(Hi, PH, SE))
            return false;
        Loops[L].R.push_back({Lo, Hi});
        return true;
    }

    void emitLoopRanges()
    {
        for (auto &KV : Loops) {
            Loop *L = KV.first;
            Instruction *PH = L->getLoopPreheader()->getTerminator();
            SCEVExpander Exp(SE, DL, "crpm.range");
            SmallVector<Value *, 8> Bounds;
            for (auto &R : KV.second.R) {
                Bounds.push_back(Exp.expandCodeFor(R.first, IntPtr, PH));
                Bounds.push_back(Exp.expandCodeFor(R.second, IntPtr, PH));
            }
            // a block of its own on each exit edge (an exit block may also be
            // reached from outside the loop, e.g. past a vector loop)
            SmallVector<Loop::Edge, 4> Edges;
            L->getExitEdges(Edges);
            SmallVector<BasicBlock *, 4> Exits;
            for (auto &E : Edges)
                Exits.push_back(SplitEdge(const_cast<BasicBlock *>(E.first), const_cast<BasicBlock *>(E.second)));
            for (size_t K = 0; K < Bounds.size(); K += 2) {
                Value *Lo = Bounds[K], *Hi = Bounds[K + 1];
                for (BasicBlock *X : Exits) {
                    IRBuilder<> B(&*X->getFirstInsertionPt());
                    B.CreateCall(MarkRange, {B.CreateIntToPtr(Lo, I8Ptr), B.CreateSub(Hi, Lo)});
                }
            }
        }
    }

    // After W.At: the box check and the call.
    void emit(const Write &W)
    {
        Instruction *Next = W.At->getNextNode();
        IRBuilder<> B(Next);
        Value *P = B.CreatePointerCast(W.Base, I8Ptr);
        if (W.Len) {
            B.CreateCall(MarkRange, {P, B.CreateZExtOrTrunc(W.Len, IntPtr)});
            return;
        }
        if (W.Lo)
            P = B.CreateConstGEP1_64(B.getInt8Ty(), P, W.Lo);
        uint64_t N = (uint64_t)(W.Hi - W.Lo);
        if (N > MaxStore) {
            B.CreateCall(MarkRange, {P, ConstantInt::get(IntPtr, N)});
            return;
        }
        LoadInst *Wd = B.CreateAlignedLoad(B.getInt64Ty(), Box, Align(8), "crpm.box");
        Wd->setAtomic(AtomicOrdering::Acquire); // the shadow pointer was set before the box
        Value *Pi = B.CreatePtrToInt(P, IntPtr);
        Value *U = B.CreateLShr(Pi, BoxShift);
        Value *Lo = B.CreateAnd(Wd, 0xffffffffull);
        Value *Span = B.CreateLShr(Wd, 32);
        Value *In = B.CreateICmpULT(B.CreateSub(U, Lo), Span, "crpm.in");
        MDBuilder MDB(M.getContext());
        Instruction *Then = SplitBlockAndInsertIfThen(In, Next, false, MDB.createBranchWeights(1, 64));
        IRBuilder<> T(Then);
        // a store that may cross a granule: out of line
        Align A = getKnownAlignment(W.Base, DL);
        bool MayCross = !(isPowerOf2_64(N) && N <= (1u << GranuleShift) && A.value() >= N && W.Lo % (int64_t)N == 0);
        if (MayCross) {
            Value *Last = T.CreateAdd(Pi, ConstantInt::get(IntPtr, N - 1));
            Value *Cross = T.CreateICmpNE(T.CreateLShr(T.CreateXor(Pi, Last), GranuleShift),
                                          ConstantInt::get(IntPtr, 0), "crpm.cross");
            Instruction *ThenCross, *ElseOne;
            SplitBlockAndInsertIfThenElse(Cross, Then, &ThenCross, &ElseOne, MDB.createBranchWeights(1, 16));
            IRBuilder<> TC(ThenCross);
            TC.CreateCall(Mark, {P, ConstantInt::get(IntPtr, N)});
            T.SetInsertPoint(ElseOne);
        }
        // the granule's shadow byte: set unless set already (marks.h: why the test is safe)
        LoadInst *Sh = T.CreateAlignedLoad(I8Ptr, Shadow, Align(8), "crpm.shadow");
        Sh->setAtomic(AtomicOrdering::Monotonic);
        Value *Q = T.CreateGEP(T.getInt8Ty(), Sh, T.CreateLShr(Pi, GranuleShift));
        T.CreateFence(AtomicOrdering::SequentiallyConsistent, SyncScope::SingleThread); // after the store
        LoadInst *Old = T.CreateAlignedLoad(T.getInt8Ty(), Q, Align(1), "crpm.old");
        Old->setAtomic(AtomicOrdering::Monotonic);
        Instruction *Here = &*T.GetInsertPoint();
        Instruction *Set =
            SplitBlockAndInsertIfThen(T.CreateICmpEQ(Old, T.getInt8(0)), Here, false, MDB.createBranchWeights(1, 4));
        IRBuilder<> S(Set);
        StoreInst *St = S.CreateAlignedStore(S.getInt8(1), Q, Align(1));
        St->setAtomic(AtomicOrdering::Release);
    }

    bool run()
    {
        SmallVector<Write, 32> Out;
        for (BasicBlock &BB : F) {
            // pending fixed-size writes of this block, by base object
            DenseMap<Value *, unsigned> Pending;
            auto Flush = [&]() { Pending.clear(); };
            for (Instruction &I : BB) {
                if (barrier(I) && !isa<AnyMemIntrinsic>(&I)) {
                    Flush();
                    if (auto *II = dyn_cast<IntrinsicInst>(&I))
                        visitMasked(II, Out);
                    continue;
                }
                Value *Ptr = nullptr, *Len = nullptr;
                uint64_t Size = 0;
                if (auto *S = dyn_cast<StoreInst>(&I)) {
                    Ptr = S->getPointerOperand();
                    TypeSize TS = DL.getTypeStoreSize(S->getValueOperand()->getType());
                    if (TS.isScalable()) {
                        Len = ConstantInt::get(IntPtr, 0); // unknown: mark from the pointer on
                    } else {
                        Size = TS.getFixedSize();
                    }
                } else if (auto *R = dyn_cast<AtomicRMWInst>(&I)) {
                    Ptr = R->getPointerOperand();
                    Size = DL.getTypeStoreSize(R->getValOperand()->getType()).getFixedSize();
                } else if (auto *X = dyn_cast<AtomicCmpXchgInst>(&I)) {
                    Ptr = X->getPointerOperand();
                    Size = DL.getTypeStoreSize(X->getNewValOperand()->getType()).getFixedSize();
                } else if (auto *MI = dyn_cast<AnyMemIntrinsic>(&I)) {
                    if (isa<AnyMemSetInst>(MI) || isa<AnyMemTransferInst>(MI)) {
                        Ptr = MI->getRawDest();
                        if (auto *C = dyn_cast<ConstantInt>(MI->getLength()))
                            Size = C->getZExtValue();
                        else
                            Len = MI->getLength();
                    }
                } else {
                    continue;
                }
                if (!Ptr || stackPrivate(Ptr))
                    continue;
                if (Len && isa<ConstantInt>(Len) && cast<ConstantInt>(Len)->isZero()) {
                    Flush(); // a scalable store: mark one maximal store from the pointer on
                    Out.push_back({&I, Ptr, 0, (int64_t)MaxStore, nullptr});
                    continue;
                }
                if (Len) {
                    Out.push_back({&I, Ptr, 0, 0, Len});
                    continue;
                }
                if (!Size)
                    continue;
                if (!isa<AnyMemIntrinsic>(&I) && tryLoop(&I, Ptr, Size))
                    continue;
                int64_t Off = 0;
                Value *Base = GetPointerBaseWithConstantOffset(Ptr, Off, DL);
                auto It = Pending.find(Base);
                if (It != Pending.end()) {
                    Write &W = Out[It->second];
                    int64_t Lo = std::min(W.Lo, Off), Hi = std::max(W.Hi, Off + (int64_t)Size);
                    if ((uint64_t)(Hi - Lo) <= MaxStore) { // one mark covers both, after the later one
                        W.Lo = Lo;
                        W.Hi = Hi;
                        W.At = &I;
                        continue;
                    }
                }
                Pending[Base] = Out.size();
                Out.push_back({&I, Base, Off, Off + (int64_t)Size, nullptr});
            }
        }
        bool Changed = !Out.empty() || !Loops.empty();
        emitLoopRanges();
        for (const Write &W : Out)
            emit(W);
        return Changed;
    }

    // Masked stores and scatters: the whole vector's bytes at the pointer,
    // or each lane's element.
    void visitMasked(IntrinsicInst *II, SmallVectorImpl<Write> &Out)
    {
        if (II->getIntrinsicID() == Intrinsic::masked_store) {
            Value *Ptr = II->getArgOperand(1);
            TypeSize TS = DL.getTypeStoreSize(II->getArgOperand(0)->getType());
            if (stackPrivate(Ptr))
                return;
            if (TS.isScalable())
                Out.push_back({II, Ptr, 0, 0, ConstantInt::get(IntPtr, 1ull << 20)});
            else
                Out.push_back({II, Ptr, 0, (int64_t)TS.getFixedSize(), nullptr});
        } else if (II->getIntrinsicID() == Intrinsic::masked_scatter) {
            auto *VT = dyn_cast<FixedVectorType>(II->getArgOperand(0)->getType());
            if (!VT)
                return;
            uint64_t Elem = DL.getTypeStoreSize(VT->getElementType()).getFixedSize();
            IRBuilder<> B(II->getNextNode());
            for (unsigned K = 0; K < VT->getNumElements(); K++) {
                Value *P = B.CreateExtractElement(II->getArgOperand(1), K);
                B.CreateCall(MarkRange, {B.CreatePointerCast(P, I8Ptr), ConstantInt::get(IntPtr, Elem)});
            }
        }
    }
};

struct CrpmInstrumentPass : PassInfoMixin<CrpmInstrumentPass> {
    PreservedAnalyses run(Function &F, FunctionAnalysisManager &AM)
    {
        if (F.isDeclaration() || F.getName().startswith("crpm_instr_") || F.hasFnAttribute("no-crpm-instrument"))
            return PreservedAnalyses::all();
        auto &LI = AM.getResult<LoopAnalysis>(F);
        auto &SE = AM.getResult<ScalarEvolutionAnalysis>(F);
        Instrumenter In(F, LI, SE);
        return In.run() ? PreservedAnalyses::none() : PreservedAnalyses::all();
    }
    static bool isRequired() { return true; } // also at -O0
};

// Each module of the program compiled with the pass says so when it is
// loaded (crpm_instr_module), so that a program that asked for instrumented
// tracking but has no instrumented code is compared instead of missing
// every change.
struct CrpmModulePass : PassInfoMixin<CrpmModulePass> {
    PreservedAnalyses run(Module &M, ModuleAnalysisManager &)
    {
        // libcrpm's own instrumented code (the heap's allocator) defines crpm_instr_library
        if (M.getNamedGlobal("crpm_instr_library") || M.getFunction("crpm.instr.module"))
            return PreservedAnalyses::all();
        LLVMContext &C = M.getContext();
        FunctionCallee Note = M.getOrInsertFunction("crpm_instr_module", Type::getVoidTy(C));
        Function *F = Function::Create(FunctionType::get(Type::getVoidTy(C), false), GlobalValue::InternalLinkage,
                                       "crpm.instr.module", M);
        IRBuilder<> B(BasicBlock::Create(C, "", F));
        B.CreateCall(Note);
        B.CreateRetVoid();
        appendToGlobalCtors(M, F, 65535);
        return PreservedAnalyses::none();
    }
    static bool isRequired() { return true; }
};

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo()
{
    return {LLVM_PLUGIN_API_VERSION, "crpm-instrument", "1", [](PassBuilder &PB) {
                PB.registerOptimizerLastEPCallback([](ModulePassManager &MPM, OptimizationLevel) {
                    MPM.addPass(createModuleToFunctionPassAdaptor(CrpmInstrumentPass()));
                    MPM.addPass(CrpmModulePass());
                });
                PB.registerPipelineParsingCallback(
                    [](StringRef Name, FunctionPassManager &FPM, ArrayRef<PassBuilder::PipelineElement>) {
                        if (Name != "crpm-instrument")
                            return false;
                        FPM.addPass(CrpmInstrumentPass());
                        return true;
                    });
            }};
}
